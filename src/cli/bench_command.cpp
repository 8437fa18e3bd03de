// `specdec bench`: the target-only baseline and speculative decoding at several gammas, on
// prompt sets of several categories and temperatures, in one process (models loaded once). The
// configurations of each (repeat, temperature, prompt) run back to back in an order that rotates
// from repeat to repeat, so machine drift touches all of them alike; every speedup compares
// medians from the same invocation. Optionally also measures what the KV cache buys.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <span>
#include <sstream>
#include <thread>

#include "cli/arg_parser.h"
#include "cli/bench_report.h"
#include "cli/commands.h"
#include "cli/engine_setup.h"
#include "cli/progress.h"
#include "common/error.h"
#include "engine/cache_ablation.h"
#include "engine/engine.h"
#include "engine/forward_cost.h"
#include "tensor/thread_pool.h"

namespace specdec::cli {
namespace {

// Repeats of each pass width when measuring pass costs for the pass model (a few seconds).
constexpr int32_t kPassCostRepeats = 7;

struct BenchOptions {
  std::string model, draft_model, prompts_dir = "bench/prompts", json;
  bool draft_ngram = false, no_cache_check = false, no_chat = false;
  NgramParams ngram;
  bool ngram_given = false;  // any --ngram-* option
  std::vector<int32_t> gammas = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> temps = {0.0f, 0.3f, 0.7f};
  std::vector<std::string> categories = {"summary", "opinion", "code"};
  float top_p = 0.9f;
  FilterOptions filters;    // --typical, --top-nsigma, --xtc-*, --dynatemp-*, --samplers
  LoraOptions lora;         // --lora, --lora-scaled
  PenaltyParams penalties;  // --repeat-penalty ... and --dry-*
  int32_t n_predict = 200, repeats = 3, threads = 0, n_ctx = 2048, cache_tokens = 32;
  DraftModelOptions drafting;
  KvTypes kv_types;
  DraftKvTypeFlags draft_kv_types;
  uint64_t seed = 1;
};

struct BenchPrompt {
  std::string category, id, text;
  std::vector<int32_t> tokens;
};

template <typename T>
void reject_duplicates(std::vector<T> v, const char* flag) {
  std::sort(v.begin(), v.end());
  if (std::adjacent_find(v.begin(), v.end()) != v.end()) fail(flag, " lists a value twice");
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read prompt file '", path.string(), "'");
  std::ostringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r'))
    text.pop_back();
  return text;
}

// Every *.txt of each category folder, sorted by file name.
std::vector<BenchPrompt> load_prompts(const BenchOptions& o) {
  namespace fs = std::filesystem;
  std::vector<BenchPrompt> prompts;
  for (const std::string& category : o.categories) {
    const fs::path dir = fs::path(o.prompts_dir) / category;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      fail("no prompt folder '", dir.string(), "' for category '", category, "' (see --prompts)");
    }
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.is_regular_file() && entry.path().extension() == ".txt")
        files.push_back(entry.path());
    }
    if (files.empty()) fail("prompt folder '", dir.string(), "' has no .txt files");
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      std::string text = read_text(f);
      if (text.empty()) fail("prompt file '", f.string(), "' is empty");
      prompts.push_back({category, f.stem().string(), std::move(text), {}});
    }
  }
  return prompts;
}

void add_options(ArgParser& p, BenchOptions& o) {
  p.add_string({"-m", "--model"}, "FILE", "target model (GGUF)", o.model);
  add_lora_options(p, o.lora);
  p.add_string({"-md", "--model-draft", "--spec-draft-model"}, "FILE",
               "draft model (GGUF) sharing the target's vocabulary", o.draft_model);
  p.add_flag({"--draft-ngram"},
             "draft by prompt lookup instead of a draft model (gammas are then the most a round "
             "drafts; see --ngram-policy)",
             o.draft_ngram);
  add_ngram_options(p, o.ngram, o.ngram_given);
  add_draft_model_options(p, o.drafting);
  add_kv_type_options(p, o.kv_types);
  add_draft_kv_type_options(p, o.draft_kv_types);
  p.add_value({"--gammas"}, "LIST", "comma-separated gammas, 1..64 (default 1,2,3,4,5,6,7,8)",
              [&o](const std::string& v) {
                o.gammas.clear();
                for (const std::string& s : split_list(v, "--gammas")) {
                  const int64_t g = parse_int(s, "--gammas");
                  if (g < 1 || g > 64) fail("--gammas values must be in [1, 64], got ", g);
                  o.gammas.push_back(static_cast<int32_t>(g));
                }
                reject_duplicates(o.gammas, "--gammas");
              });
  p.add_value({"--temps"}, "LIST", "comma-separated temperatures, 0..100 (default 0,0.3,0.7)",
              [&o](const std::string& v) {
                o.temps.clear();
                for (const std::string& s : split_list(v, "--temps")) {
                  const double t = parse_float(s, "--temps");
                  if (!(t >= 0 && t <= 100)) fail("--temps values must be in [0, 100], got ", s);
                  o.temps.push_back(static_cast<float>(t));
                }
                reject_duplicates(o.temps, "--temps");
              });
  p.add_float({"--top-p"}, "P", "top-p filter for T > 0 (1: off; top-k and min-p are off)", o.top_p,
              0.0, 1.0);
  add_filter_options(p, o.filters);
  add_penalty_options(p, o.penalties);
  p.add_string({"--prompts"}, "DIR", "prompt folder: one sub-folder of *.txt per category",
               o.prompts_dir);
  p.add_value({"--categories"}, "LIST", "comma-separated categories (default summary,opinion,code)",
              [&o](const std::string& v) {
                o.categories = split_list(v, "--categories");
                reject_duplicates(o.categories, "--categories");
              });
  p.add_flag({"--no-chat"}, "use the prompt files as raw text, not as a chat user message",
             o.no_chat);
  p.add_int({"-n", "--n-predict"}, "N", "tokens generated per run (end tokens are ignored)",
            o.n_predict, 1, 1 << 20);
  p.add_int({"--repeats"}, "N", "runs of every configuration on every prompt", o.repeats, 1, 1000);
  p.add_u64({"-s", "--seed"}, "SEED", "base seed (a run's seed depends on prompt and repeat)",
            o.seed);
  p.add_int({"-t", "--threads"}, "N", "threads (default: all cores)", o.threads, 1, 1024);
  p.add_int({"-c", "--ctx-size"}, "N", "context size in tokens", o.n_ctx, 8, 1 << 20);
  p.add_string({"--json"}, "FILE", "write every raw measurement and the summary as JSON", o.json);
  p.add_flag({"--no-cache-check"}, "skip the KV-cache ablation", o.no_cache_check);
  p.add_int({"--cache-check-tokens"}, "N", "tokens generated by the KV-cache ablation",
            o.cache_tokens, 1, 4096);
}

CacheCheck run_cache_check(Model& model, const std::vector<int32_t>& prompt, const BenchOptions& o,
                           int n_threads) {
  ThreadPool pool(n_threads);
  CacheCheck c;
  c.prompt_tokens = static_cast<int32_t>(prompt.size());
  c.tokens = o.cache_tokens;
  c.repeats = o.repeats;
  ProgressBar bar("kv-cache check");
  for (int32_t rep = 0; rep < o.repeats; ++rep) {
    // Alternate which variant goes first, for the same reason the main runs rotate.
    GreedyTiming with, without;
    if (rep % 2 == 0) {
      with = greedy_with_cache(model, prompt, o.cache_tokens, pool);
      without = greedy_without_cache(model, prompt, o.cache_tokens, pool);
    } else {
      without = greedy_without_cache(model, prompt, o.cache_tokens, pool);
      with = greedy_with_cache(model, prompt, o.cache_tokens, pool);
    }
    c.cached_ms.push_back(with.total_ms);
    c.uncached_ms.push_back(without.total_ms);
    c.same_tokens = c.same_tokens && with.tokens == without.tokens;
    bar.update(rep + 1, o.repeats);
  }
  bar.finish();
  return c;
}

}  // namespace

int bench_command(const std::vector<std::string>& args) {
  BenchOptions o;
  ArgParser p("specdec bench -m TARGET (-md DRAFT | --draft-ngram) [options]",
              "Benchmarks speculative decoding against the target alone in one process: for\n"
              "every prompt of every category, temperature and repeat, the baseline and each\n"
              "gamma run back to back in a rotating order. Prints per (category, T, gamma) the\n"
              "median decode speed, acceptance, accepted tokens per round, the measured speedup\n"
              "and the analytic one from the measured acceptance and draft cost, and a pass model\n"
              "(every target pass of a run charged the cost of a pass of its width, measured on\n"
              "the first prompt before the runs); then what the KV cache buys (the whole prefix\n"
              "recomputed per token vs the cache).");
  add_options(p, o);
  if (!p.parse(args)) {
    std::cout << p.help();
    return 0;
  }
  if (o.model.empty()) fail("-m MODEL is required (see specdec bench --help)");
  if (o.drafting.spec_type.given) {
    if (o.draft_ngram) fail("--spec-type and --draft-ngram both choose the drafter: give one");
    if (o.drafting.spec_type.none)
      fail("--spec-type none: bench measures speculation; give a drafter");
    o.draft_ngram = apply_spec_type(o.drafting.spec_type, o.drafting, o.draft_model, std::cerr);
  }
  if (o.draft_ngram == !o.draft_model.empty()) {
    fail(o.draft_ngram ? "--draft-ngram and -md are mutually exclusive"
                       : "bench needs a drafter: -md DRAFT or --draft-ngram");
  }
  check_draft_model_options(o.drafting);  // bad --draft-*type values fail before any model loads
  const bool hybrid = check_hybrid_option(o.drafting.hybrid, !o.draft_model.empty());
  o.draft_kv_types.check(!o.draft_model.empty());
  check_ngram_options(o.ngram, o.ngram_given, o.draft_ngram || hybrid);
  std::vector<BenchPrompt> prompts = load_prompts(o);

  LoadedModel target = LoadedModel::load(o.model);
  apply_lora_options(o.lora, target);
  std::unique_ptr<LoadedModel> draft = load_draft(o.draft_model, o.drafting);
  EngineOptions eo;
  eo.n_ctx = o.n_ctx;
  eo.kv_types = o.kv_types;
  eo.draft_kv_types = o.draft_kv_types.resolve(o.kv_types);
  eo.n_threads = thread_count(o.threads);
  eo.draft_vocab = o.drafting.vocab;
  auto engine = std::make_unique<Engine>(target, draft.get(), eo);

  const int32_t max_gamma = *std::max_element(o.gammas.begin(), o.gammas.end());
  for (BenchPrompt& bp : prompts) {
    std::string text = bp.text;
    if (!o.no_chat) {
      const std::vector<ChatMessage> msgs = {{"user", bp.text}};
      text = engine->chat_template().apply(msgs, /*add_generation_prompt=*/true);
    }
    bp.tokens = engine->tokenize_prompt(text);
    // Every run must generate all n tokens, or per-token latencies would mix lengths.
    const int64_t need = static_cast<int64_t>(bp.tokens.size()) + o.n_predict + max_gamma + 1;
    if (need > o.n_ctx) {
      fail("prompt ", bp.category, "/", bp.id, " (", bp.tokens.size(), " tokens) + ", o.n_predict,
           " generated + gamma ", max_gamma, " needs -c ", need, " (have ", o.n_ctx, ")");
    }
  }

  auto options_for = [&](float temp, int32_t gamma, uint64_t seed, int32_t n) {
    GenerationOptions go;
    go.max_tokens = n;
    go.sampling.temperature = temp;
    go.sampling.top_k = 0;
    go.sampling.top_p = o.top_p;
    go.sampling.min_p = 0;
    go.penalties = o.penalties;
    take_filters(o.filters, go.sampling, go.penalties);
    go.sampling.seed = seed;
    go.ignore_eos = true;  // fixed-length runs
    go.speculative = gamma > 0;
    go.draft_max = gamma > 0 ? gamma : 1;
    go.draft_length = o.drafting.length;
    go.draft_context = o.drafting.context;
    go.hybrid = hybrid;
    go.drafter = o.draft_ngram ? DrafterKind::Ngram : DrafterKind::Model;
    go.ngram = o.ngram;
    return go;
  };
  // Warm-up (not recorded): page in the weights and size every buffer before timing anything.
  for (int32_t gamma : {0, max_gamma}) {
    engine->generate(prompts[0].tokens, options_for(o.temps[0], gamma, o.seed, 8), {});
  }

  // Pass costs for the pass model: a target pass over k = 1 .. max_gamma + 1 tokens on top of
  // the first prompt, relative to one decode step (what `specdec verify-cost` measures).
  // The prefix is cut to fit the model's trained context if it must be.
  std::vector<double> pass_cost;
  const int64_t pass_room = int64_t{target.model->config().n_ctx_train} - (max_gamma + 1);
  const std::span<const int32_t> pass_prefix(
      prompts[0].tokens.data(), static_cast<size_t>(std::clamp<int64_t>(
                                    pass_room, 0, static_cast<int64_t>(prompts[0].tokens.size()))));
  if (!pass_prefix.empty()) {
    ThreadPool pool(eo.n_threads);
    for (const ForwardCost& fc :
         measure_forward_costs(*target.model, pass_prefix, max_gamma + 1, kPassCostRepeats, pool)) {
      pass_cost.push_back(fc.ratio);
    }
  }

  std::vector<int32_t> configs = {0};
  configs.insert(configs.end(), o.gammas.begin(), o.gammas.end());
  const auto n_configs = static_cast<int32_t>(configs.size());
  const int64_t total = static_cast<int64_t>(o.repeats) * static_cast<int64_t>(o.temps.size()) *
                        static_cast<int64_t>(prompts.size()) * n_configs;
  std::vector<BenchRun> runs;
  runs.reserve(static_cast<size_t>(total));
  ProgressBar bar("bench");
  for (int32_t rep = 0; rep < o.repeats; ++rep) {
    // Spread the rotation over the repeats so each configuration takes different slots.
    const int32_t shift = static_cast<int32_t>(
        (static_cast<int64_t>(rep) * std::max<int32_t>(1, n_configs / o.repeats)) % n_configs);
    for (float temp : o.temps) {
      for (size_t pi = 0; pi < prompts.size(); ++pi) {
        const BenchPrompt& bp = prompts[pi];
        const uint64_t seed = o.seed + 1000 * static_cast<uint64_t>(rep) + pi;
        for (int32_t k = 0; k < n_configs; ++k) {
          BenchRun r;
          r.category = bp.category;
          r.prompt_id = bp.id;
          r.temperature = temp;
          r.gamma = configs[static_cast<size_t>((k + shift) % n_configs)];
          r.repeat = rep;
          r.order = k;
          r.options = options_for(temp, r.gamma, seed, o.n_predict);
          r.result = engine->generate(bp.tokens, r.options, {});
          r.result.text.clear();  // not reported; keeps memory flat over long runs
          runs.push_back(std::move(r));
          bar.update(static_cast<int64_t>(runs.size()), total);
        }
      }
    }
  }
  bar.finish();
  const int32_t draft_width = engine->draft_vocab_width();
  engine.reset();  // its thread pool and caches are not needed for the cache check

  const std::vector<BenchRow> rows = summarize_runs(runs, pass_cost);
  std::string sequence_note;  // llama.cpp's sampler order, when --samplers gave one
  if (o.filters.sequence) {
    sequence_note = ", samplers";
    for (const std::string& name : *o.filters.sequence) sequence_note += " " + name;
  }
  std::cout << "target: " << o.model << "\n"
            << "drafter: "
            << (o.draft_ngram ? "n-gram prompt lookup (" + describe_ngram(o.ngram) + ")"
                              : o.draft_model)
            << (o.draft_ngram
                    ? std::string()
                    : ", scoring " +
                          (o.drafting.vocab > 0 ? "the " + std::to_string(o.drafting.vocab) +
                                                      " most frequent and each prompt's tokens (" +
                                                      std::to_string(draft_width) + " for the last)"
                                                : std::to_string(draft_width)) +
                          " of " + std::to_string(target.model->config().n_vocab) +
                          " tokens, blocks " + o.drafting.type + ", head " + o.drafting.head_type +
                          ", " + draft_policy_name(o.drafting.length) + " length" +
                          (hybrid ? ", hybrid with prompt lookup" : ""))
            << "\n"
            << "threads " << eo.n_threads << ", " << o.n_predict << " tokens per run, " << o.repeats
            << " repeats, top-p " << o.top_p << sequence_note << ", " << prompts.size()
            << " prompts (" << (o.no_chat ? "raw" : "chat-formatted") << ")\n";
  std::cout << "pass cost (target pass over k tokens / decode step, " << pass_prefix.size()
            << "-token prefix, median of " << kPassCostRepeats << "):";
  for (size_t k = 1; k < pass_cost.size(); ++k) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " k=%zu %.2f", k + 1, pass_cost[k]);
    std::cout << buf;
  }
  std::cout << "\n\n" << format_table(rows);

  CacheCheck cache;
  if (!o.no_cache_check) {
    cache = run_cache_check(*target.model, prompts[0].tokens, o, eo.n_threads);
    std::cout << "\n" << format_cache_check(cache);
  }

  if (!o.json.empty()) {
    nlohmann::json j;
    nlohmann::json prompt_list = nlohmann::json::array();
    for (const BenchPrompt& bp : prompts) {
      prompt_list.push_back(
          {{"category", bp.category}, {"id", bp.id}, {"tokens", bp.tokens.size()}});
    }
    j["meta"] = {
        {"target", o.model},
        {"draft", o.draft_model},
        {"drafter", o.draft_ngram ? "ngram" : "model"},
        {"ngram", o.draft_ngram ? nlohmann::json{{"n_max", o.ngram.n_max},
                                                 {"n_min", o.ngram.n_min},
                                                 {"policy", ngram_policy_name(o.ngram.policy)},
                                                 {"verify_cost", o.ngram.verify_cost},
                                                 {"adapt_rate", o.ngram.adapt_rate}}
                                : nlohmann::json()},
        {"threads", eo.n_threads},
        {"draft_vocab", o.draft_ngram ? 0 : draft_width},
        {"draft_vocab_top", o.draft_ngram ? 0 : o.drafting.vocab},
        {"draft_type", o.drafting.type},
        {"draft_head_type", o.drafting.head_type},
        {"draft_policy", draft_policy_name(o.drafting.length)},
        {"draft_hybrid", hybrid},
        {"draft_cost", o.drafting.length.draft_cost},
        {"draft_verify_cost", o.drafting.length.verify_cost},
        {"n_ctx", o.n_ctx},
        {"n_predict", o.n_predict},
        {"repeats", o.repeats},
        {"gammas", o.gammas},
        {"temperatures", o.temps},
        {"top_p", o.top_p},
        {"typical_p", o.filters.typical_p},
        {"top_n_sigma", o.filters.top_n_sigma},
        {"xtc_probability", o.filters.xtc_probability},
        {"xtc_threshold", o.filters.xtc_threshold},
        {"dynatemp_range", o.filters.dynatemp_range},
        {"mirostat", o.filters.mirostat},
        {"mirostat_tau", o.filters.mirostat_tau},
        {"mirostat_eta", o.filters.mirostat_eta},
        {"samplers", o.filters.sequence ? nlohmann::json(*o.filters.sequence) : nlohmann::json()},
        {"dry_multiplier", o.penalties.dry.multiplier},
        {"repeat_penalty", o.penalties.repetition_penalty},
        {"repeat_last_n", o.penalties.last_n},
        {"seed", o.seed},
        {"chat", !o.no_chat},
        {"prompts", prompt_list}};
    nlohmann::json summary = nlohmann::json::array();
    for (const BenchRow& r : rows) summary.push_back(row_to_json(r));
    j["summary"] = std::move(summary);
    nlohmann::json raw = nlohmann::json::array();
    for (const BenchRun& r : runs) raw.push_back(run_to_json(r, eo.n_threads));
    j["runs"] = std::move(raw);
    if (!o.no_cache_check) j["cache_check"] = cache_check_to_json(cache);
    j["pass_cost"] = {{"prefix_tokens", pass_prefix.size()},
                      {"repeats", kPassCostRepeats},
                      {"ratio_by_k", pass_cost}};
    std::ofstream out(o.json);
    if (!out) fail("cannot write --json file '", o.json, "'");
    out << j.dump() << "\n";
    if (!out) fail("writing --json file '", o.json, "' failed");
  }
  return 0;
}

}  // namespace specdec::cli
