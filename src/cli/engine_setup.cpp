#include "cli/engine_setup.h"

#include <sys/mman.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "engine/draft_vocab.h"
#include "grammar/json_schema.h"
#include "grammar/regex_gbnf.h"
#include "model/lora.h"
#include "sampling/sampler_sequence.h"

namespace specdec::cli {

int thread_count(int32_t requested) {
  if (requested > 0) return requested;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::string read_text_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read ", what, " '", path, "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

namespace {

std::string upper_case(const std::string& name) {
  std::string upper = name;
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return upper;
}

// --draft-type auto: Q4_0 where the file's type is wider.
bool is_auto_draft_type(const std::string& name) { return upper_case(name) == "AUTO"; }

}  // namespace

std::optional<GgmlType> parse_draft_type(const std::string& flag, const std::string& name) {
  const std::string upper = upper_case(name);
  if (upper == "FILE") return std::nullopt;
  if (upper == "AUTO" && flag == "--draft-type") return kAutoDraftType;
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q4_K,
                     GgmlType::Q5_K, GgmlType::Q6_K}) {
    if (type_name(t) == upper) return t;
  }
  fail(flag, " must be ", flag == "--draft-type" ? "auto, " : "",
       "file, q4_0, q4_1, q5_0, q8_0, q4_k, q5_k or q6_k, got '", name, "'");
}

void check_draft_model_options(const DraftModelOptions& options) {
  parse_draft_type("--draft-type", options.type);
  parse_draft_type("--draft-head-type", options.head_type);
}

std::unique_ptr<LoadedModel> load_draft(const std::string& path, const DraftModelOptions& options,
                                        gguf::GgufFile::Access access) {
  ModelLoadOptions layout;
  layout.matrix_type = parse_draft_type("--draft-type", options.type);
  layout.matrix_type_only_where_smaller = is_auto_draft_type(options.type);
  layout.output_type = parse_draft_type("--draft-head-type", options.head_type);
  if (path.empty()) return nullptr;
  return std::make_unique<LoadedModel>(LoadedModel::load(
      path,
      [&](const Tokenizer& tok, const ModelConfig& config) {
        ModelLoadOptions l = layout;
        // The head in frequency order, so that the engine's per-prompt subset (EngineOptions::
        // draft_vocab) is mostly one contiguous range of rows.
        if (options.vocab > 0) l.output_ids = draft_head_order(tok, config.n_vocab);
        return l;
      },
      access));
}

void add_draft_max_option(ArgParser& p, int32_t& draft_max, const std::string& help) {
  p.add_value({"--draft-max", "--draft", "--draft-n", "--spec-draft-n-max"}, "N",
              help + " (default: " + std::to_string(kDefaultGreedyDraftMax) +
                  " at temperature 0 with a draft model, " + std::to_string(kDefaultDraftMax) +
                  " otherwise)",
              [&draft_max](const std::string& v) {
                const int64_t n = parse_int(v, "--draft-max");
                if (n < 1 || n > 64) fail("--draft-max must be in [1, 64], got ", v);
                draft_max = static_cast<int32_t>(n);
              });
}

int32_t draft_max_for(int32_t given, bool greedy, bool model_draft) {
  if (given > 0) return given;
  return greedy && model_draft ? kDefaultGreedyDraftMax : kDefaultDraftMax;
}

void add_draft_vocab_option(ArgParser& p, int32_t& draft_vocab) {
  p.add_int({"--draft-vocab"}, "N",
            "the draft model scores only the N most frequent tokens plus the control tokens, the "
            "prompt's own and, as it appears, every token of the answer (0: all). Lossless: "
            "changes speed, never the output",
            draft_vocab, 0, 1 << 24);
}

DraftLengthParams default_draft_length() {
  // Measured on the Qwen2.5-Coder pair, 2 threads: a draft step costs 0.25-0.36 target steps
  // (bench column c) and a verified row about 0.08 of one up to 5 rows (verify-cost).
  DraftLengthParams p;
  p.adaptive = true;
  p.draft_cost = 0.3f;
  p.verify_cost = 0.08f;
  // No pass-cost line by default: the 1.5B's measured line (verify-cost --prefix 512: 1.12 1.24
  // 1.42 1.46 2.04 2.07 2.28 2.51 for k = 2..9) cut rounds shorter and ran 12 % slower than the
  // flat 0.08 on summaries at T = 0.3 (8 paired runs, docs/benchmarks.md).
  return p;
}

namespace {

// A float as a help text shows it (shortest form: 0.36, not 0.360000).
std::string text(float x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

}  // namespace

const char* draft_policy_name(const DraftLengthParams& params) {
  if (!params.adaptive) return "fixed";
  return params.calibrate ? "adaptive" : "confidence";
}

namespace {

// One cache-type flag: parses f32|f16|q8_0 into `set`, refusing anything else by its flag's name.
void add_kv_type_option(ArgParser& p, std::vector<std::string> names, std::string help,
                        std::function<void(KvType)> set) {
  const std::string flag = names.back();
  p.add_value(std::move(names), "f32|f16|q8_0", std::move(help),
              [flag, set = std::move(set)](const std::string& v) {
                const std::optional<KvType> t = parse_kv_type(v);
                if (!t) fail(flag, " must be f32, f16 or q8_0, got '", v, "'");
                set(*t);
              });
}

}  // namespace

void add_kv_type_options(ArgParser& p, KvTypes& types) {
  const auto help = [](const char* what) {
    return str_cat("how the KV caches store ", what,
                   ": f32, f16 (half the memory and attention reads) or q8_0 (8-bit blocks of 32 "
                   "with an fp16 scale, about a quarter; keys scored in integer arithmetic; needs "
                   "a head size divisible by 32); default f32");
  };
  add_kv_type_option(p, {"-ctk", "--cache-type-k"}, help("keys"),
                     [&types](KvType t) { types.k = t; });
  add_kv_type_option(p, {"-ctv", "--cache-type-v"}, help("values"),
                     [&types](KvType t) { types.v = t; });
}

std::optional<KvTypes> DraftKvTypeFlags::resolve(KvTypes target) const {
  if (!k && !v) return std::nullopt;
  return KvTypes{k.value_or(target.k), v.value_or(target.v)};
}

void DraftKvTypeFlags::check(bool has_draft_model) const {
  if ((k || v) && !has_draft_model) {
    fail(
        "-ctkd/-ctvd set the draft model's cache types: give -md DRAFT too (without a draft "
        "model they would change nothing)");
  }
}

void add_draft_kv_type_options(ArgParser& p, DraftKvTypeFlags& types) {
  const auto help = [](const char* what) {
    return str_cat("how the draft's KV caches store ", what,
                   " (f32, f16 or q8_0; the output stays exact whatever the draft stores); "
                   "default: as the target's");
  };
  add_kv_type_option(p, {"-ctkd", "--spec-draft-type-k", "--cache-type-k-draft"}, help("keys"),
                     [&types](KvType t) { types.k = t; });
  add_kv_type_option(p, {"-ctvd", "--spec-draft-type-v", "--cache-type-v-draft"}, help("values"),
                     [&types](KvType t) { types.v = t; });
}

void add_draft_length_options(ArgParser& p, DraftLengthParams& params) {
  p.add_value(
      {"--draft-policy"}, "fixed|adaptive|confidence",
      std::string("fixed: always draft --draft-max tokens; adaptive: stop a round when the "
                  "chance that the drafts pass, judged by how drafts of the draft's confidence "
                  "fared earlier in the run, no longer pays for drafting and verifying; "
                  "confidence: the same rule with the draft's top probability taken as that "
                  "chance (default ") +
          draft_policy_name(default_draft_length()) + ")",
      [&params](const std::string& v) {
        if (v == "fixed") {
          params.adaptive = false;
        } else if (v == "adaptive" || v == "confidence") {
          params.adaptive = true;
          params.calibrate = v == "adaptive";
        } else {
          fail("--draft-policy must be fixed, adaptive or confidence, got '", v, "'");
        }
      });
  p.add_float({"--draft-p-min", "--spec-draft-p-min"}, "P",
              "whatever the policy, end a round before a draft the draft model gives less than "
              "probability P (its top probability; llama.cpp's rule, whose default is 0.75; 0: "
              "off, the policy alone decides)",
              params.p_min, 0.0, 1.0);
  p.add_float({"--draft-cost"}, "C",
              "adaptive: one draft step in target decode steps (specdec bench's column c)",
              params.draft_cost, 0.0, 10.0);
  p.add_float({"--draft-verify-cost"}, "V",
              "adaptive: one more verified token in target decode steps (specdec verify-cost); "
              "the same for every row, unless --draft-pass-costs is given",
              params.verify_cost, 0.0, 10.0);
  p.add_value({"--draft-pass-costs"}, "LIST",
              "adaptive: a target pass over 2, 3, ... tokens in decode steps (the line "
              "`specdec verify-cost` prints for them); a draft's verify row then costs the rise "
              "of its lower convex hull instead of --draft-verify-cost (default: off)",
              [&params](const std::string& v) {
                params.pass_costs.clear();
                for (const std::string& item : split_list(v, "--draft-pass-costs")) {
                  const double c = parse_float(item, "--draft-pass-costs");
                  if (!(c >= 1 && c <= 100)) {
                    fail("--draft-pass-costs values must be in [1, 100] decode steps, got ", item);
                  }
                  params.pass_costs.push_back(static_cast<float>(c));
                }
                if (params.pass_costs.size() > 63)
                  fail("--draft-pass-costs takes at most 63 values");
              });
}

void add_grammar_options(ArgParser& p, GrammarOptions& options) {
  p.add_string({"--grammar"}, "GBNF",
               "generate only text this grammar (llama.cpp's GBNF, root rule 'root') matches",
               options.grammar);
  p.add_string({"--grammar-file"}, "FILE", "--grammar, read from a file", options.grammar_file);
  p.add_string({"-j", "--json-schema"}, "SCHEMA",
               "generate only JSON valid under this JSON Schema ('{}': any JSON value)",
               options.json_schema);
  p.add_string({"-jf", "--json-schema-file"}, "FILE", "--json-schema, read from a file",
               options.json_schema_file);
  p.add_string({"--regex"}, "PATTERN",
               "generate only text this regular expression (ECMAScript syntax) matches whole",
               options.regex);
}

std::shared_ptr<const Grammar> load_grammar(const GrammarOptions& options) {
  const int given = !options.grammar.empty() + !options.grammar_file.empty() +
                    !options.json_schema.empty() + !options.json_schema_file.empty() +
                    !options.regex.empty();
  if (given == 0) return nullptr;
  if (given > 1) {
    fail("give one of --grammar, --grammar-file, --json-schema, --json-schema-file and --regex");
  }
  const char* flag = !options.grammar.empty()            ? "--grammar"
                     : !options.grammar_file.empty()     ? "--grammar-file"
                     : !options.json_schema.empty()      ? "--json-schema"
                     : !options.json_schema_file.empty() ? "--json-schema-file"
                                                         : "--regex";
  try {
    std::string gbnf;
    if (!options.regex.empty()) {
      gbnf = str_cat("root ::= ", regex_gbnf(options.regex, RegexText::kPlain, RegexMatch::kWhole),
                     "\n");
    } else if (!options.grammar.empty() || !options.grammar_file.empty()) {
      gbnf = options.grammar.empty() ? read_text_file(options.grammar_file, "grammar file")
                                     : options.grammar;
    } else {
      const std::string text = options.json_schema.empty()
                                   ? read_text_file(options.json_schema_file, "JSON Schema file")
                                   : options.json_schema;
      const auto schema = nlohmann::ordered_json::parse(text, nullptr, false);
      if (schema.is_discarded()) fail("not valid JSON");
      gbnf = json_schema_gbnf(schema);
    }
    return Grammar::parse(gbnf);
  } catch (const Error& e) {
    fail(flag, ": ", e.what());
  }
}

void add_lora_options(ArgParser& p, LoraOptions& lora) {
  p.add_value({"--lora"}, "FILE[,FILE...]",
              "apply a LoRA adapter (llama.cpp's GGUF form) to the target at scale 1; repeatable",
              [&lora](const std::string& v) {
                for (const std::string& path : split_list(v, "--lora")) {
                  lora.adapters.emplace_back(path, 1.0f);
                }
              });
  p.add_value({"--lora-scaled"}, "FILE:SCALE[,...]",
              "apply a LoRA adapter to the target at this scale; repeatable",
              [&lora](const std::string& v) {
                for (const std::string& item : split_list(v, "--lora-scaled")) {
                  const size_t colon = item.rfind(':');
                  if (colon == std::string::npos || colon == 0 || colon + 1 == item.size()) {
                    fail("--lora-scaled: '", item, "' is not FILE:SCALE");
                  }
                  const double scale = parse_float(item.substr(colon + 1), "--lora-scaled scale");
                  if (!std::isfinite(scale)) fail("--lora-scaled: the scale must be finite");
                  lora.adapters.emplace_back(item.substr(0, colon), static_cast<float>(scale));
                }
              });
}

void apply_lora_options(const LoraOptions& lora, LoadedModel& target) {
  // After the adapters the model came with (an Ollama model's ADAPTER layers).
  add_lora_files(*target.model, lora.adapters);
}

void add_filter_options(ArgParser& p, FilterOptions& filters) {
  const auto add = [&p, &filters](const char* name, float SamplingParams::*field,
                                  const char* help) {
    p.add_value({name}, "N", help, [&filters, name, field](const std::string& v) {
      filters.*field = static_cast<float>(parse_float(v, name));
      check_sampling_params(filters);
    });
  };
  add("--typical", &SamplingParams::typical_p,
      "locally typical sampling: keep the tokens whose surprise is nearest the entropy, up to "
      "probability N (1: off) (default: 1)");
  add("--top-nsigma", &SamplingParams::top_n_sigma,
      "keep the tokens whose logit is within N standard deviations of the largest (<= 0: off) "
      "(default: -1)");
  add("--xtc-probability", &SamplingParams::xtc_probability,
      "XTC: with probability N, exclude the tokens at or above --xtc-threshold but the least "
      "likely of them, 0..1 (0: off) (default: 0)");
  add("--dynatemp-range", &SamplingParams::dynatemp_range,
      "dynamic temperature: sample at a temperature between --temp - N and --temp + N, higher "
      "the flatter the filtered distribution (0: off) (default: 0)");
  add("--dynatemp-exp", &SamplingParams::dynatemp_exponent,
      "dynamic temperature: the exponent of the mapping from entropy to temperature "
      "(default: 1)");
  add("--xtc-threshold", &SamplingParams::xtc_threshold,
      "XTC: the probability that makes a token a top choice, 0..1 (above 0.5: off) "
      "(default: 0.1)");
  p.add_value({"--mirostat"}, "N",
              "Mirostat sampling, version 1 or 2 (0: off); it replaces top-k, top-p, min-p and "
              "the filters above (default: 0)",
              [&filters](const std::string& v) {
                filters.mirostat = static_cast<int>(parse_int(v, "--mirostat"));
                check_sampling_params(filters);
              });
  add("--mirostat-ent", &SamplingParams::mirostat_tau,
      "Mirostat's target surprise tau, in bits per token (default: 5)");
  add("--mirostat-lr", &SamplingParams::mirostat_eta,
      "Mirostat's learning rate eta (default: 0.1)");
  p.add_value({"--samplers"}, "LIST",
              "llama.cpp's sampler sequence, names separated by ';' (penalties;dry;top_n_sigma;"
              "top_k;typ_p;top_p;min_p;xtc;temperature): stages left out are off, and the "
              "temperature applies where the list puts it, first or last (default: the "
              "temperature first, as in vLLM)",
              [&filters](const std::string& v) { filters.sequence = parse_samplers_flag(v); });
  p.add_value({"--sampling-seq", "--sampler-seq"}, "LETTERS",
              "the sampler sequence as llama.cpp's letters: e penalties, d dry, s top_n_sigma, "
              "k top_k, y typ_p, p top_p, m min_p, x xtc, t temperature (edskypmxt: the "
              "temperature last)",
              [&filters](const std::string& v) { filters.sequence = parse_sampling_seq_flag(v); });
}

std::vector<std::string> parse_samplers_flag(const std::string& v) {
  std::vector<std::string> names;
  std::string_view rest = v;
  while (!rest.empty()) {
    const size_t end = std::min(rest.find(';'), rest.size());
    const std::string name(rest.substr(0, end));
    const std::string canonical = canonical_sampler_name(name);
    if (canonical.empty() && !name.empty()) {
      fail("--samplers: no sampler named '", name,
           "' (names: penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature)");
    }
    names.push_back(canonical);
    rest.remove_prefix(std::min(end + 1, rest.size()));
  }
  return names;
}

std::vector<std::string> parse_sampling_seq_flag(const std::string& v) {
  for (char c : v) {
    if (sampler_names_of_letters(std::string(1, c)).empty()) {
      fail("--sampling-seq: no sampler has the letter '", std::string(1, c),
           "' (letters: edskypmxt)");
    }
  }
  return sampler_names_of_letters(v);
}

void take_filters(const FilterOptions& filters, SamplingParams& sampling,
                  PenaltyParams& penalties) {
  sampling.typical_p = filters.typical_p;
  sampling.top_n_sigma = filters.top_n_sigma;
  sampling.xtc_probability = filters.xtc_probability;
  sampling.xtc_threshold = filters.xtc_threshold;
  sampling.dynatemp_range = filters.dynatemp_range;
  sampling.dynatemp_exponent = filters.dynatemp_exponent;
  sampling.mirostat = filters.mirostat;
  sampling.mirostat_tau = filters.mirostat_tau;
  sampling.mirostat_eta = filters.mirostat_eta;
  if (filters.sequence) apply_sampler_sequence(*filters.sequence, sampling, penalties);
}

std::string unescape_breaker(const std::string& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != '\\' || i + 1 == v.size()) {
      out += v[i];
      continue;
    }
    const char c = v[++i];
    out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
  }
  return out;
}

void add_chat_template_options(ArgParser& p, ChatTemplateOption& option) {
  p.add_value({"--chat-template"}, "NAME|JINJA",
              "chat template in place of the model file's: chatml, llama3, llama2, gemma, "
              "zephyr, phi3, or a Jinja template of one of those families",
              [&option](const std::string& v) {
                try {
                  (void)ChatTemplate::named(v);  // now, for a template specdec does not render
                } catch (const Error& e) {
                  fail("--chat-template: ", e.what());
                }
                option.text = v;
              });
  p.add_value({"--chat-template-file"}, "FILE", "the same, read from FILE (a Jinja template)",
              [&option](const std::string& v) {
                const std::string text = read_text_file(v, "--chat-template-file");
                try {
                  (void)ChatTemplate::named(text);
                } catch (const Error& e) {
                  fail("--chat-template-file ", v, ": ", e.what());
                }
                option.text = text;
              });
  p.add_value({"--jinja"}, "",
              "accepted for llama-server's command lines: chat templates are always rendered, "
              "with their tool calling",
              [](const std::string&) {});
}

void apply_chat_template_option(const ChatTemplateOption& option, LoadedModel& target) {
  if (option.text.empty()) return;
  target.chat_template =
      std::make_unique<ChatTemplate>(ChatTemplate::from_gguf(*target.file, option.text));
}

void add_device_options(ArgParser& p, DeviceOptions& options) {
  p.add_value({"-ngl", "--n-gpu-layers", "--gpu-layers"}, "N",
              "accepted for llama.cpp's command lines: specdec runs every layer on the CPU",
              [&options](const std::string& v) {
                (void)parse_int(v, "--n-gpu-layers");
                options.gpu_layers = v;
              });
  p.add_value({"-fa", "--flash-attn"}, "on|off|auto",
              "accepted for llama.cpp's command lines: specdec's CPU attention is its own",
              [&options](const std::string& v) {
                if (v != "on" && v != "off" && v != "auto") {
                  fail("--flash-attn must be on, off or auto, got '", v, "'");
                }
                options.flash_attn = v;
              });
  p.add_flag({"--mlock"}, "keep the models in RAM: lock the process's memory (mlockall)",
             options.mlock);
  p.add_value({"--no-mmap"}, "",
              "read the model files whole into memory at load instead of mapping them (no page "
              "faults on the files later; the raw weights that packing replaces are freed, as "
              "with a mapping)",
              [&options](const std::string&) { options.no_mmap = true; });
  p.add_value({"--mmap"}, "", "map the model files (the default)",
              [&options](const std::string&) { options.no_mmap = false; });
  p.add_value({"-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft", "--spec-draft-ngl"}, "N",
              "accepted for llama.cpp's command lines: the draft runs on the CPU too",
              [&options](const std::string& v) {
                (void)parse_int(v, "--gpu-layers-draft");
                if (v != "0") options.notes.push_back(str_cat("-ngld ", v, " changes nothing"));
              });
  const auto devices = [&options](const char* flag) {
    return [&options, flag](const std::string& v) {
      if (v.empty()) fail(flag, " wants a device list (none, or llama.cpp's names)");
      if (v != "none" && v != "cpu" && v != "CPU") {
        options.notes.push_back(str_cat(flag, " ", v, " changes nothing"));
      }
    };
  };
  p.add_value({"-dev", "--device"}, "LIST",
              "accepted for llama.cpp's command lines: specdec's one device is the CPU",
              devices("--device"));
  p.add_value({"-devd", "--device-draft", "--spec-draft-device"}, "LIST",
              "the same for the draft model", devices("--device-draft"));
  const auto threads = [&options](const char* flag) {
    return [&options, flag](const std::string& v) {
      const int64_t n = parse_int(v, flag);
      if (n < -1 || n == 0 || n > 1024) fail(flag, " must be -1 or in [1, 1024], got ", v);
      options.notes.push_back(str_cat(flag, " ", v, " changes nothing"));
    };
  };
  p.add_value({"-tb", "--threads-batch"}, "N",
              "accepted for llama.cpp's command lines: prompts and batches run on the -t threads",
              threads("--threads-batch"));
  p.add_value({"-td", "--threads-draft"}, "N",
              "accepted for llama.cpp's command lines: the draft runs on the -t threads between "
              "the target's passes",
              threads("--threads-draft"));
  p.add_value({"-tbd", "--threads-batch-draft"}, "N", "the same", threads("--threads-batch-draft"));
}

void apply_device_options(const DeviceOptions& options, std::ostream& log) {
  if (!options.gpu_layers.empty() && options.gpu_layers != "0") {
    log << "specdec: -ngl " << options.gpu_layers
        << " changes nothing: specdec has no GPU offload and runs every layer on the CPU\n";
  }
  for (const std::string& note : options.notes) {
    log << "specdec: " << note
        << ": specdec runs on the CPU, the target's and the draft's passes taking turns on one "
           "pool of -t threads\n";
  }
  if (options.flash_attn == "on") {
    log << "specdec: --flash-attn on changes nothing: the attention runs in specdec's own CPU "
           "kernels\n";
  }
  if (options.mlock) {
    if (::mlockall(MCL_CURRENT) != 0) {
      log << "specdec: warning: --mlock: mlockall failed: " << std::strerror(errno)
          << " (the memlock limit, ulimit -l, may be too low); the models may be paged out\n";
    } else {
      log << "specdec: --mlock: memory locked\n";
    }
  }
  log.flush();
}

std::pair<int32_t, float> parse_logit_bias_flag(const std::string& v) {
  const size_t sign = v.find_first_of("+-", 1);
  if (v.empty() || sign == std::string::npos) {
    fail("--logit-bias wants TOKEN+BIAS or TOKEN-BIAS, got '", v, "'");
  }
  const int64_t id = parse_int(std::string_view(v).substr(0, sign), "--logit-bias");
  if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
    fail("--logit-bias token id must be >= 0, got ", id);
  }
  const double bias = parse_float(std::string_view(v).substr(sign), "--logit-bias");
  return {static_cast<int32_t>(id), static_cast<float>(bias)};
}

void add_penalty_options(ArgParser& p, PenaltyParams& penalties) {
  // Each value is checked as it is parsed, with the ranges of check_penalty_params (the
  // vocabulary is not known yet: ids are checked when the engine runs).
  const auto checked = [&penalties] {
    check_penalty_params(penalties, std::numeric_limits<int32_t>::max());
  };
  // The three numeric penalties: one flag each, parsed into its field and range-checked.
  const auto add_penalty = [&p, &penalties, checked](const char* name, float PenaltyParams::*field,
                                                     const char* help) {
    p.add_value({name}, "P", help, [&penalties, checked, name, field](const std::string& v) {
      penalties.*field = static_cast<float>(parse_float(v, name));
      checked();
    });
  };
  add_penalty("--repeat-penalty", &PenaltyParams::repetition_penalty,
              "divide positive and multiply negative logits of every token of the prompt or the "
              "text so far by P (1: off; Hugging Face/vLLM repetition_penalty) (default: 1)");
  add_penalty("--presence-penalty", &PenaltyParams::presence_penalty,
              "subtract P from the logit of every token generated so far, -2..2 (0: off; OpenAI "
              "presence_penalty) (default: 0)");
  add_penalty("--frequency-penalty", &PenaltyParams::frequency_penalty,
              "subtract P per earlier occurrence in the generated text, -2..2 (0: off; OpenAI "
              "frequency_penalty) (default: 0)");
  p.add_value({"--repeat-last-n"}, "N",
              "count the three penalties over the last N tokens of the prompt and the text, all "
              "three alike (llama.cpp's rule; -1: all of them, 0: off); without it, OpenAI's "
              "rule: the repetition penalty over the prompt and the text, presence and frequency "
              "over the generated text",
              [&penalties, checked](const std::string& v) {
                const int64_t n = parse_int(v, "--repeat-last-n");
                if (n < -1) fail("--repeat-last-n must be >= 0, or -1 (all), got ", n);
                penalties.last_n = n == -1 || n > PenaltyParams::kWholeText
                                       ? PenaltyParams::kWholeText
                                       : static_cast<int32_t>(n);
                checked();
              });
  p.add_value({"-l", "--logit-bias"}, "TOKEN(+|-)BIAS",
              "add BIAS (-100..100; -100 bans the token) to token id TOKEN's logit, e.g. "
              "15043+1.5 or 151645-100 (repeatable)",
              [&penalties, checked](const std::string& v) {
                penalties.logit_bias.push_back(parse_logit_bias_flag(v));
                checked();
              });
  // DRY, with llama.cpp's flags and defaults.
  DryParams& dry = penalties.dry;
  p.add_value({"--dry-multiplier"}, "N",
              "DRY: lower the logit of a token that would extend a repeat of the text's end by "
              "N * base^(length - allowed length) (0: off) (default: 0)",
              [&dry, checked](const std::string& v) {
                dry.multiplier = static_cast<float>(parse_float(v, "--dry-multiplier"));
                checked();
              });
  p.add_value({"--dry-base"}, "N", "DRY: the base of the penalty's growth (default: 1.75)",
              [&dry, checked](const std::string& v) {
                dry.base = static_cast<float>(parse_float(v, "--dry-base"));
                checked();
              });
  p.add_value({"--dry-allowed-length"}, "N",
              "DRY: repeats this long or shorter are not penalized (default: 2)",
              [&dry, checked](const std::string& v) {
                dry.allowed_length = static_cast<int32_t>(
                    std::clamp<int64_t>(parse_int(v, "--dry-allowed-length"), -1, 1 << 24));
                checked();
              });
  p.add_value({"--dry-penalty-last-n"}, "N",
              "DRY: how many of the text's last tokens (the prompt's included) are searched for "
              "repeats (-1: all, 0: off) (default: -1)",
              [&dry, checked](const std::string& v) {
                dry.penalty_last_n = static_cast<int32_t>(
                    std::clamp<int64_t>(parse_int(v, "--dry-penalty-last-n"), -2, 1 << 24));
                checked();
              });
  auto replaced = std::make_shared<bool>(false);
  p.add_value({"--dry-sequence-breaker"}, "TEXT",
              "DRY: a repeat does not reach back past TEXT (repeatable; the first one replaces the "
              "defaults \\n : \" *; 'none': no breakers)",
              [&dry, replaced](const std::string& v) {
                if (!*replaced || v == "none") dry.sequence_breakers.clear();
                *replaced = true;
                if (v != "none") dry.sequence_breakers.push_back(unescape_breaker(v));
              });
}

void add_hybrid_option(ArgParser& p, HybridOption& hybrid) {
  p.add_value({"--draft-hybrid"}, "",
              std::string("with -md: draft by prompt lookup when it proposes >= 2 tokens (free), "
                          "by the draft model otherwise (lossless; the --ngram-* options tune "
                          "the lookup)") +
                  (kDefaultDraftHybrid ? "; the default" : ""),
              [&hybrid](const std::string&) {
                hybrid = {true, true};
              });
  p.add_value({"--no-draft-hybrid"}, "",
              std::string("with -md: always draft with the draft model") +
                  (kDefaultDraftHybrid ? "" : "; the default"),
              [&hybrid](const std::string&) {
                hybrid = {false, true};
              });
}

bool check_hybrid_option(const HybridOption& hybrid, bool has_draft_model) {
  if (hybrid.given && hybrid.on && !has_draft_model)
    fail("--draft-hybrid needs a draft model (-md DRAFT)");
  return hybrid.on && has_draft_model;
}

void add_ngram_options(ArgParser& p, NgramParams& params, bool& given) {
  const NgramParams defaults;
  // Parsed by hand rather than with add_int/add_float, to know whether they were given while the
  // help still shows the defaults.
  const auto int_flag = [&given](const char* name, int32_t& out) {
    return [&given, name, target = &out](const std::string& v) {
      const int64_t n = parse_int(v, name);
      if (n < 1 || n > NgramDrafter::kMaxN) {
        fail(name, " must be in [1, ", NgramDrafter::kMaxN, "], got ", n);
      }
      *target = static_cast<int32_t>(n);
      given = true;
    };
  };
  const auto float_flag = [&given](const char* name, float& out, double max) {
    return [&given, name, target = &out, max](const std::string& v) {
      const double x = parse_float(v, name);
      if (!(x >= 0 && x <= max)) fail(name, " must be in [0, ", max, "], got ", v);
      *target = static_cast<float>(x);
      given = true;
    };
  };
  p.add_value({"--ngram-max"}, "N",
              "longest suffix looked up with --draft-ngram (default: " +
                  std::to_string(defaults.n_max) + ")",
              int_flag("--ngram-max", params.n_max));
  p.add_value({"--ngram-min"}, "N",
              "shortest suffix looked up with --draft-ngram (default: " +
                  std::to_string(defaults.n_min) + ")",
              int_flag("--ngram-min", params.n_min));
  p.add_value({"--ngram-policy"}, "adaptive|fixed",
              std::string("how many looked-up tokens a round proposes. adaptive: only as many as "
                          "are likely enough to be accepted to pay for their verification "
                          "(judged by how far the match reaches back and by how earlier drafts "
                          "fared), often none; fixed: every match copies up to --draft-max "
                          "tokens (default: ") +
                  ngram_policy_name(defaults.policy) + ")",
              [&given, &params](const std::string& v) {
                if (v == "adaptive") {
                  params.policy = NgramPolicy::Adaptive;
                } else if (v == "fixed") {
                  params.policy = NgramPolicy::Fixed;
                } else {
                  fail("--ngram-policy must be adaptive or fixed, got '", v, "'");
                }
                given = true;
              });
  p.add_value({"--ngram-verify-cost"}, "C",
              "adaptive policy: extra cost of one more drafted token in a verify pass, in target "
              "decode steps; a k-th draft is proposed only while P(drafts 1..k accepted) > 1.2 C. "
              "Lower it when batched verification is cheap, e.g. 0.1 (default: " +
                  text(defaults.verify_cost) + ")",
              float_flag("--ngram-verify-cost", params.verify_cost, 10.0));
  p.add_value({"--ngram-adapt-rate"}, "R",
              "adaptive policy: how fast the acceptance estimate follows the run's own rounds "
              "(0: the built-in prior only) (default: " +
                  text(defaults.adapt_rate) + ")",
              float_flag("--ngram-adapt-rate", params.adapt_rate, 1.0));
}

void check_ngram_options(const NgramParams& params, bool given, bool draft_ngram) {
  if (!draft_ngram && given) {
    fail(
        "the --ngram-* options tune prompt lookup: they need --draft-ngram, --draft-hybrid (the "
        "default with -md) or --spec-type ngram-*");
  }
  if (params.n_min > params.n_max) {
    fail("--ngram-min (", params.n_min, ") must not exceed --ngram-max (", params.n_max, ")");
  }
}

std::string describe_ngram(const NgramParams& params) {
  std::ostringstream s;
  s << "n " << params.n_min << ".." << params.n_max << ", " << ngram_policy_name(params.policy);
  if (params.policy == NgramPolicy::Adaptive) {
    s << ", verify cost " << params.verify_cost << ", adapt rate " << params.adapt_rate;
  }
  return s.str();
}

void add_draft_layout_options(ArgParser& p, DraftModelOptions& options) {
  add_draft_vocab_option(p, options.vocab);
  // (add_string appends each flag's default to its help.)
  p.add_string({"--draft-type"}, "TYPE",
               "requantize the draft's block matrices into this format at load (q4_0, q4_1, "
               "q5_0, q8_0, q4_k, ...; file: keep the file's; auto: q4_0 for the matrices the "
               "file stores in more bits per weight, the file's type for the others). Lossless: "
               "changes speed and acceptance, never the output",
               options.type);
  p.add_string({"--draft-head-type"}, "TYPE",
               "the same for the draft's output head (auto is for the blocks only)",
               options.head_type);
}

void add_draft_model_options(ArgParser& p, DraftModelOptions& options) {
  add_draft_layout_options(p, options);
  add_draft_length_options(p, options.length);
  add_hybrid_option(p, options.hybrid);
  p.add_int({"--draft-context", "-cd", "--ctx-size-draft"}, "N",
            "the draft model reads at most the last N tokens of a prompt it has not read (its "
            "proposals then condition on those alone; lossless, changes speed and acceptance; "
            "0: the whole prompt; not applied where batched slots share draft rows). -cd: "
            "llama.cpp's draft context size, whose draft likewise reads only the prompt's end",
            options.context, 0, 1 << 20);
  p.add_int({"--draft-min", "--draft-n-min", "--spec-draft-n-min"}, "N",
            "the draft model drafts at least N tokens a round (neither --draft-p-min nor the "
            "adaptive rule ends it sooner), a round with room for fewer is a plain target step, "
            "and a shorter prompt-lookup proposal is dropped as llama-server drops a small "
            "draft (at most --draft-max; 0: off)",
            options.length.min_drafts, 0, 64);
  add_spec_type_option(p, options.spec_type);
}

void add_spec_type_option(ArgParser& p, SpecType& type) {
  p.add_value({"--spec-type"}, "LIST",
              "llama.cpp's drafters, comma-separated: none (no speculation; -md is not loaded), "
              "draft-simple (the -md draft model alone, no prompt lookup), ngram-simple, "
              "ngram-map-k, ngram-map-k4v, ngram-mod or ngram-cache (prompt lookup, specdec's "
              "own); draft-simple with an ngram type is the hybrid (--draft-hybrid). Default: "
              "-md's draft with --draft-hybrid's setting",
              [&type](const std::string& v) { type = parse_spec_type(v); });
}

SpecType parse_spec_type(const std::string& list) {
  SpecType t;
  t.given = true;
  for (const std::string& name : split_list(list, "--spec-type")) {
    if (name == "none") {
      t.none = true;
    } else if (name == "draft-simple" || name == "draft") {
      t.model = true;
    } else if (name == "ngram-simple" || name == "ngram-map-k" || name == "ngram-map-k4v" ||
               name == "ngram-mod" || name == "ngram-cache") {
      t.lookup = true;
    } else if (name.starts_with("draft-") || name == "mtp" || name == "eagle3") {
      fail("--spec-type ", name,
           " needs draft heads built into a model, which specdec does not run; it drafts with a "
           "draft model (draft-simple, -md DRAFT) or by prompt lookup (ngram-*)");
    } else {
      fail("--spec-type: unknown type '", name,
           "' (none, draft-simple, ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod, "
           "ngram-cache)");
    }
  }
  if (t.none && (t.model || t.lookup)) fail("--spec-type none cannot be combined with a drafter");
  return t;
}

bool apply_spec_type(const SpecType& type, DraftModelOptions& options, std::string& draft_model,
                     std::ostream& log) {
  if (!type.given) return false;
  if (type.none) {
    if (!draft_model.empty()) {
      log << "specdec: --spec-type none: no speculation; the draft model " << draft_model
          << " is not loaded\n";
    }
    if (options.hybrid.given && options.hybrid.on) {
      fail("--draft-hybrid drafts, and --spec-type none says not to: give one of them");
    }
    draft_model.clear();
    options.hybrid.on = false;
    return false;
  }
  if (type.model) {
    if (draft_model.empty()) fail("--spec-type draft-simple needs a draft model (-md DRAFT)");
    if (options.hybrid.given && options.hybrid.on != type.lookup) {
      fail("--spec-type ", type.lookup ? "draft-simple with ngram-*" : "draft-simple alone",
           " and --", options.hybrid.on ? "" : "no-", "draft-hybrid contradict each other");
    }
    options.hybrid.on = type.lookup;
    return false;
  }
  // Prompt lookup alone.
  if (options.hybrid.given && options.hybrid.on) {
    fail("--draft-hybrid needs the draft model, which --spec-type without draft-simple leaves out");
  }
  if (!draft_model.empty()) {
    log << "specdec: --spec-type without draft-simple: prompt lookup alone; the draft model "
        << draft_model << " is not loaded\n";
  }
  draft_model.clear();
  options.hybrid.on = false;
  return true;
}

}  // namespace specdec::cli
