#include "cli/request_default_options.h"

#include <array>
#include <memory>
#include <utility>
#include <vector>

#include "cli/engine_setup.h"
#include "cli/reasoning_options.h"
#include "common/error.h"
#include "server/api_error.h"

namespace specdec::cli {

namespace {

using nlohmann::json;

// Flag -> the chat-completions field it sets, and whether the value is an integer.
struct NumericFlag {
  const char* flag;
  const char* field;
  bool integer;
  const char* help;
};

constexpr std::array<NumericFlag, 21> kNumericFlags = {{
    {"--temp", "temperature", false, "temperature, 0..2 (0: greedy)"},
    {"--top-k", "top_k", true, "top-k (0 or less: off)"},
    {"--top-p", "top_p", false, "top-p (1: off)"},
    {"--min-p", "min_p", false, "min-p (0: off)"},
    {"--typical", "typical_p", false, "locally typical sampling's p (1: off)"},
    {"--top-nsigma", "top_n_sigma", false, "top-n-sigma (0 or less: off)"},
    {"--xtc-probability", "xtc_probability", false, "XTC's probability (0: off)"},
    {"--xtc-threshold", "xtc_threshold", false, "XTC's threshold"},
    {"--dynatemp-range", "dynatemp_range", false, "dynamic temperature's range (0: off)"},
    {"--dynatemp-exp", "dynatemp_exponent", false, "dynamic temperature's exponent"},
    {"--mirostat", "mirostat", true, "Mirostat version, 0 (off), 1 or 2"},
    {"--mirostat-ent", "mirostat_tau", false, "Mirostat's target surprise tau"},
    {"--mirostat-lr", "mirostat_eta", false, "Mirostat's learning rate eta"},
    {"--repeat-penalty", "repeat_penalty", false, "repetition penalty (1: off)"},
    {"--presence-penalty", "presence_penalty", false, "presence penalty, -2..2"},
    {"--frequency-penalty", "frequency_penalty", false, "frequency penalty, -2..2"},
    {"--repeat-last-n", "repeat_last_n", true,
     "tokens the penalties count over (-1: all; llama.cpp's rule)"},
    {"--dry-multiplier", "dry_multiplier", false, "DRY's multiplier (0: off)"},
    {"--dry-base", "dry_base", false, "DRY's base"},
    {"--dry-allowed-length", "dry_allowed_length", true, "DRY's allowed repeat length"},
    {"--dry-penalty-last-n", "dry_penalty_last_n", true,
     "tokens DRY searches for repeats (-1: all)"},
}};

// The other flags' fields.
constexpr std::array<std::pair<const char*, const char*>, 10> kOtherFlags = {{
    {"--samplers", "samplers"},
    {"--logit-bias", "logit_bias"},
    {"--dry-sequence-breaker", "dry_sequence_breakers"},
    {"--seed", "seed"},
    {"--n-predict", "max_tokens"},
    {"--ignore-eos", "ignore_eos"},
    {"--reasoning-format", "reasoning_format"},
    {"--reasoning-budget", "chat_template_kwargs.enable_thinking"},
    {"--reasoning-budget", "reasoning_budget_tokens"},
    {"--reasoning-budget-message", "reasoning_budget_message"},
}};

constexpr const char* kRequestsThat = "requests' default ";
constexpr const char* kOwnDefault =
    " when they send none (default: each endpoint's own: OpenAI's /v1 endpoints as OpenAI, "
    "/completion and Ollama's as llama-server and Ollama)";

}  // namespace

std::string request_default_flag(const std::string& field) {
  for (const NumericFlag& f : kNumericFlags) {
    if (field == f.field) return f.flag;
  }
  for (const auto& [flag, name] : kOtherFlags) {
    if (field == name) return flag;
  }
  return field;
}

void add_request_default_options(ArgParser& p, server::RequestDefaults& defaults) {
  json& d = defaults.fields;
  for (const NumericFlag& f : kNumericFlags) {
    p.add_value({f.flag}, f.integer ? "N" : "X", str_cat(kRequestsThat, f.help, kOwnDefault),
                [&d, f](const std::string& v) {
                  if (f.integer) {
                    int64_t n = parse_int(v, f.flag);
                    // llama.cpp's spellings of "off" that a request writes as 0.
                    if (std::string_view(f.field) == "top_k" && n < 0) n = 0;
                    d[f.field] = n;
                  } else {
                    d[f.field] = parse_float(v, f.flag);
                  }
                });
  }
  p.add_value({"--samplers"}, "LIST",
              "requests' default sampler sequence, names separated by ';' (llama-server's "
              "samplers; see specdec run --help)",
              [&d](const std::string& v) { d["samplers"] = parse_samplers_flag(v); });
  p.add_value({"--sampling-seq", "--sampler-seq"}, "LETTERS",
              "requests' default sampler sequence as llama.cpp's letters (edskypmxt)",
              [&d](const std::string& v) { d["samplers"] = parse_sampling_seq_flag(v); });
  p.add_value({"-l", "--logit-bias"}, "TOKEN(+|-)BIAS",
              "add BIAS to token id TOKEN's logit in every request that sends no logit_bias "
              "(repeatable)",
              [&d](const std::string& v) {
                const auto [id, bias] = parse_logit_bias_flag(v);
                d["logit_bias"][std::to_string(id)] = bias;
              });
  auto replaced = std::make_shared<bool>(false);
  p.add_value({"--dry-sequence-breaker"}, "TEXT",
              "requests' default DRY breakers (repeatable; the first one replaces DRY's "
              "defaults; 'none': no breakers)",
              [&d, replaced](const std::string& v) {
                if (!*replaced || v == "none") d["dry_sequence_breakers"] = json::array();
                *replaced = true;
                if (v != "none") d["dry_sequence_breakers"].push_back(unescape_breaker(v));
              });
  // -1 is llama.cpp's spelling of "none" for these two: no default at all.
  const auto add_unless_minus_one = [&p, &d](std::vector<std::string> names, const char* field,
                                             const char* help) {
    const std::string flag = names.back();
    p.add_value(std::move(names), "N", help, [&d, field, flag](const std::string& v) {
      const int64_t n = parse_int(v, flag);
      if (n == -1) {
        d.erase(field);
      } else {
        d[field] = n;
      }
    });
  };
  add_unless_minus_one({"-s", "--seed"}, "seed",
                       "the seed of every request that sends none: each such request then samples "
                       "the same text for the same input (-1: a random seed per request, the "
                       "default)");
  add_unless_minus_one({"-n", "--n-predict"}, "max_tokens",
                       "requests' default limit on generated tokens (max_tokens, n_predict, "
                       "num_predict) when they set none (-1: until the end of the text or of the "
                       "context, the default)");
  p.add_value({"--ignore-eos"}, "",
              "every request that does not say otherwise goes on past the end-of-text token",
              [&d](const std::string&) { d["ignore_eos"] = true; });
  // llama-server's reasoning flags, for thinking templates (server/reasoning.h).
  p.add_value({"--reasoning-format"}, "FORMAT",
              "how a thinking model's reply comes back when a request does not say "
              "(reasoning_format): auto or deepseek, its <think> block apart (reasoning_content, "
              "Ollama's thinking, a thinking block); none, the reply whole in the content; "
              "deepseek-legacy, both in chat completions (default: auto)",
              [&d](const std::string& v) { d["reasoning_format"] = v; });
  p.add_value({"--reasoning-budget"}, "N",
              "-1: thinking models think as long as they like (the default); 0: they do not, "
              "unless a request asks (chat_template_kwargs.enable_thinking, Ollama's think, "
              "Anthropic's thinking); N > 0: at most N tokens inside a <think> block, after which "
              "--reasoning-budget-message and the closing tag are forced and the answer follows "
              "(requests' reasoning_budget_tokens, Anthropic's thinking.budget_tokens), as "
              "llama-server's",
              [&d](const std::string& v) {
                const int32_t n = parse_reasoning_budget(v);
                d.erase("chat_template_kwargs");
                d.erase("reasoning_budget_tokens");
                if (n == 0) {
                  d["chat_template_kwargs"] = {{"enable_thinking", false}};
                } else if (n > 0) {
                  d["reasoning_budget_tokens"] = n;
                }
              });
  p.add_value({"--reasoning-budget-message"}, "TEXT",
              "what the reasoning says before its block is closed for it when the budget is "
              "spent (requests' reasoning_budget_message; default: nothing)",
              [&d](const std::string& v) { d["reasoning_budget_message"] = v; });
}

void check_request_default_options(const server::RequestDefaults& defaults) {
  try {
    server::check_request_defaults(defaults);
  } catch (const server::ApiError& e) {
    fail(request_default_flag(e.param()), ": ", e.what());
  }
}

}  // namespace specdec::cli
