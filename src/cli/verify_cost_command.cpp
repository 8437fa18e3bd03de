// `specdec verify-cost -m MODEL`: the kernel-level numbers behind speculative speedups, measured
// side by side in one process: the cost of a forward pass over k = gamma + 1 tokens relative to
// one decode step, the weight bandwidth a decode step achieves, and the machine's streaming-read
// bandwidth with the same thread count (the physical limit of a memory-bound decode step).
// With -md, also what one step of the draft costs against the target's (c) in each layout the
// draft flags select, and the --draft-cost / --draft-verify-cost the adaptive rule should use.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <vector>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/engine_setup.h"
#include "common/error.h"
#include "engine/bench_stats.h"
#include "engine/draft_vocab.h"
#include "engine/forward_cost.h"
#include "engine/loaded_model.h"
#include "engine/vocab_compat.h"
#include "tensor/thread_pool.h"

namespace specdec::cli {
namespace {

// A factual English paragraph, repeated as needed: the prefix only sets the attention length.
constexpr const char* kPrefixText =
    "The Amazon rainforest covers much of the Amazon basin of South America. The basin spans "
    "seven million square kilometres, of which five and a half million are covered by the "
    "rainforest. The region includes territory belonging to nine nations and thousands of "
    "indigenous communities. ";

volatile uint64_t g_stream_sink = 0;

// Sums a buffer well past the last-level cache, split over the pool's threads: the read
// bandwidth a memory-bound matrix-vector pass could at best reach. Median of `repeats`, GB/s,
// of plain reads or, with `prefetch`, of reads that also ask for the line 8 KiB ahead into L2
// (prefetcht1), as the decode kernels do on Intel (cpu_features.h: decode_prefetch).
double stream_read_gbs(const std::vector<uint64_t>& buf, ThreadPool& pool, int32_t repeats,
                       bool prefetch) {
  const size_t n = buf.size();
  std::atomic<uint64_t> total{0};  // one relaxed add per chunk: no race, no measurable cost
  std::vector<double> gbs;
  constexpr size_t kAhead = 8192 / sizeof(uint64_t), kLine = 64 / sizeof(uint64_t);
  for (int32_t r = 0; r <= repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(
        static_cast<int64_t>(n / 4096),
        [&](int64_t c0, int64_t c1) {
          uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
          for (size_t i = static_cast<size_t>(c0) * 4096; i < static_cast<size_t>(c1) * 4096;
               i += 4) {
            if (prefetch && i % kLine == 0 && i + kAhead < n) {
              __builtin_prefetch(&buf[i + kAhead], 0, 2);
            }
            s0 += buf[i];
            s1 += buf[i + 1];
            s2 += buf[i + 2];
            s3 += buf[i + 3];
          }
          total.fetch_add(s0 + s1 + s2 + s3, std::memory_order_relaxed);
        },
        64);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) gbs.push_back(static_cast<double>(n * sizeof(uint64_t)) / s / 1e9);  // r=0 warms
  }
  g_stream_sink = total.load();  // a volatile store: the reads cannot be optimized away
  return median(gbs);
}

// The better of plain and prefetched streaming reads over one 512 MiB buffer: on a 2-core
// Intel Xeon (Emerald Rapids) VM plain reads measured 14.3 GB/s while a decode step moved
// 22.9 GB/s of weights, so a probe without prefetching understated what the machine streams.
double best_stream_read_gbs(ThreadPool& pool, int32_t repeats) {
  const std::vector<uint64_t> buf((512u << 20) / sizeof(uint64_t), 1);
  return std::max(stream_read_gbs(buf, pool, repeats, false),
                  stream_read_gbs(buf, pool, repeats, true));
}

// One way of laying out and scoring the draft (a row of the draft table).
struct DraftLayout {
  std::string name;
  std::unique_ptr<LoadedModel> model;
  std::optional<VocabSubset> vocab;
  int32_t rows_scored() const { return vocab ? vocab->width() : model->model->head_rows(); }
};

// The layouts the draft flags lead to, each against the one before: the file as it is, scoring
// the whole head; the head cut to --draft-vocab rows plus the prefix's and the control tokens
// (as a generation with that prompt would); the requantized weights (--draft-type,
// --draft-head-type). The last is what `specdec run` would use with the same flags.
// Throws specdec::Error if the draft's vocabulary is not the target's.
std::vector<DraftLayout> draft_layouts(const std::string& path, const DraftModelOptions& options,
                                       const Tokenizer& target_vocab,
                                       std::span<const int32_t> prefix) {
  std::vector<DraftLayout> layouts;
  DraftModelOptions plain;
  plain.vocab = 0;
  plain.type = "file";
  layouts.push_back({"the file's types, whole head", load_draft(path, plain), std::nullopt});
  check_vocab_compatible(*layouts.front().model->tokenizer, target_vocab);
  auto cut = [&](DraftLayout& l) {
    const Model& m = *l.model->model;
    l.vocab = draft_vocab_for_prompt(*l.model->tokenizer, m.logit_ids(), m.head_rows(),
                                     options.vocab, prefix);
  };
  if (options.vocab > 0) {
    DraftModelOptions o = plain;
    o.vocab = options.vocab;
    layouts.push_back(
        {"head cut to " + std::to_string(options.vocab) + " + the prefix's + control tokens",
         load_draft(path, o), std::nullopt});
    cut(layouts.back());
  }
  // What the flags ask for, compared as parsed (FILE and file are the same layout).
  if (parse_draft_type("--draft-type", options.type) ||
      parse_draft_type("--draft-head-type", options.head_type)) {
    std::string name = "--draft-type " + options.type + ", --draft-head-type " + options.head_type;
    if (options.vocab > 0) name += ", head cut";
    layouts.push_back({name, load_draft(path, options), std::nullopt});
    if (options.vocab > 0) cut(layouts.back());
  }
  return layouts;
}

// The passes over 2..k tokens as a --draft-pass-costs value (2 decimals, as measured noise
// allows).
std::string pass_cost_list(const std::vector<ForwardCost>& costs) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2);
  for (size_t i = 1; i < costs.size(); ++i)
    s << (i > 1 ? "," : "") << std::max(1.0, costs[i].ratio);
  return s.str();
}

}  // namespace

int verify_cost_command(const std::vector<std::string>& args) {
  std::string model_path, draft_path, json_path;
  DraftModelOptions draft_options;
  int32_t threads = 0, k_max = 9, prefix_len = 128, repeats = 15;
  KvTypes kv_types;
  DraftKvTypeFlags draft_kv_types;
  ArgParser p("specdec verify-cost -m MODEL [options]",
              "Measures the cost of one target forward pass over k = gamma + 1 tokens (all rows'\n"
              "logits, as a verify pass computes them) divided by one decode step, on top of a\n"
              "cached prefix, with the configurations rotated and medians of repeats; also the\n"
              "weight bandwidth a decode step achieves against the machine's streaming-read\n"
              "bandwidth measured with the same threads.");
  p.add_string({"-m", "--model"}, "FILE", "GGUF model file (the target)", model_path);
  p.add_string({"-md", "--model-draft", "--spec-draft-model"}, "FILE",
               "also time one decode step of this draft model against the target's, in each "
               "layout the draft flags below lead to (c, the cost of one drafted token)",
               draft_path);
  add_draft_layout_options(p, draft_options);
  p.add_int({"-t", "--threads"}, "N", "threads (default: all cores)", threads, 0, 1024);
  p.add_int({"--k-max"}, "K", "largest pass measured, in tokens (gamma + 1)", k_max, 1, 64);
  p.add_int({"--prefix"}, "N", "cached tokens the passes run on top of", prefix_len, 1, 1 << 16);
  p.add_int({"--repeats"}, "N", "timed passes per k", repeats, 1, 10000);
  add_kv_type_options(p, kv_types);
  add_draft_kv_type_options(p, draft_kv_types);
  p.add_string({"--json"}, "FILE", "also write every timing as JSON", json_path);
  if (!p.parse(args)) {
    std::cout << p.help();
    return 0;
  }
  if (model_path.empty()) fail("-m MODEL is required (see specdec verify-cost --help)");
  check_draft_model_options(draft_options);
  draft_kv_types.check(!draft_path.empty());
  LoadedModel m = LoadedModel::load(model_path);
  const int32_t n_ctx_train = m.model->config().n_ctx_train;
  if (prefix_len + k_max > n_ctx_train) {
    fail("--prefix ", prefix_len, " + --k-max ", k_max, " exceeds the model's context of ",
         n_ctx_train, " tokens");
  }
  std::vector<int32_t> prefix;
  while (static_cast<int32_t>(prefix.size()) < prefix_len) {
    const std::vector<int32_t> t =
        m.tokenizer->encode(kPrefixText, /*add_special=*/false, /*parse_special=*/false);
    if (t.empty()) fail("the tokenizer produced no tokens for the prefix text");
    prefix.insert(prefix.end(), t.begin(), t.end());
  }
  prefix.resize(static_cast<size_t>(prefix_len));

  const int n_threads = thread_count(threads);
  ThreadPool pool(n_threads);
  const std::vector<ForwardCost> costs =
      measure_forward_costs(*m.model, prefix, k_max, repeats, pool, kv_types);
  std::vector<DraftLayout> layouts;
  std::vector<ForwardCost> steps;  // the target's decode step, then each draft layout's
  const KvTypes draft_types = draft_kv_types.resolve(kv_types).value_or(kv_types);
  if (!draft_path.empty()) {
    layouts = draft_layouts(draft_path, draft_options, *m.tokenizer, prefix);
    std::vector<StepSubject> subjects(1);
    subjects[0].model = m.model.get();
    subjects[0].kv_types = kv_types;
    for (const DraftLayout& l : layouts) {
      subjects.push_back({l.model->model.get(), l.vocab, draft_types});
    }
    steps = measure_step_costs(subjects, prefix, repeats, pool);
  }
  const double stream = best_stream_read_gbs(pool, 5);
  const double step_s = costs[0].median_ms / 1e3;
  // What a decode step streams: not the embedding table, of which it looks up one row.
  const double step_bytes = static_cast<double>(m.model->decode_weight_bytes());
  const double weight_gbs = step_bytes / step_s / 1e9;

  std::cout << "model: " << model_path << "\n"
            << "threads " << n_threads << ", prefix " << prefix_len << " tokens, " << repeats
            << " repeats per k (medians), KV cache " << kv_types_name(kv_types) << "\n\n";
  std::cout << "| k (gamma + 1) | gamma | pass ms | pass / decode step | CPU ms (caller) | CPU "
               "ratio |\n|---|---|---:|---:|---:|---:|\n";
  for (const ForwardCost& c : costs) {
    std::cout << "| " << c.k << " | " << c.k - 1 << " | " << std::fixed << std::setprecision(2)
              << c.median_ms << " | " << c.ratio << " | " << c.median_cpu_ms << " | " << c.cpu_ratio
              << " |\n";
  }
  if (n_threads == 1) {
    std::cout << "(1 thread: the CPU-time ratio is the kernels' cost even on a busy machine)\n";
  }
  std::cout << "\ndecode step: " << std::setprecision(2) << costs[0].median_ms << " ms ("
            << std::setprecision(1) << 1e3 / costs[0].median_ms << " tok/s); weights "
            << std::setprecision(1) << step_bytes / (1 << 20)
            << " MiB per step (all but the token embedding table, of which a step reads one row) = "
            << std::setprecision(2) << weight_gbs << " GB/s; stream read " << stream << " GB/s ("
            << std::setprecision(0) << 100.0 * weight_gbs / stream << "% of it)\n";

  // The adaptive rule's price of one more verified row: the pass cost's slope up to 5 rows,
  // about what a round verifies.
  const int32_t k_slope = std::min<int32_t>(5, k_max);
  const double row_cost =
      k_slope > 1
          ? std::max(0.0, (costs[static_cast<size_t>(k_slope - 1)].ratio - 1.0) / (k_slope - 1))
          : 0.0;
  if (!steps.empty()) {
    std::cout << "\ndraft: " << draft_path << " (one decode step per layout, rotated with the "
              << "target's; medians of " << repeats << "; KV cache " << kv_types_name(draft_types)
              << ")\n\n"
              << "| model, layout | head rows scored | step ms | c = step / target step |\n"
              << "|---|---:|---:|---:|\n";
    for (size_t i = 0; i < steps.size(); ++i) {
      std::cout << "| " << (i == 0 ? std::string("target") : "draft: " + layouts[i - 1].name)
                << " | " << (i == 0 ? m.model->head_rows() : layouts[i - 1].rows_scored()) << " | "
                << std::setprecision(2) << steps[i].median_ms << " | " << steps[i].ratio << " |\n";
    }
    std::cout << "\nadaptive draft length for this pair (run, chat, serve, bench): --draft-cost "
              << std::setprecision(2) << steps.back().ratio;
    if (k_slope > 1) std::cout << " --draft-verify-cost " << std::setprecision(3) << row_cost;
    std::cout << "\n(c of the last layout, the one these flags select";
    if (k_slope > 1) {
      std::cout << "; a verified row costs the pass cost's slope from k = 1 to " << k_slope;
    }
    std::cout << ")\n";
  }
  if (k_max > 1) {
    // The whole line, for the rule that prices each row by it (not the default: on the Qwen
    // pair the flat slope measured faster, docs/benchmarks.md).
    std::cout << "\nthe pass-cost line as --draft-pass-costs " << pass_cost_list(costs) << "\n";
  }

  if (!json_path.empty()) {
    nlohmann::json j;
    j["model"] = model_path;
    j["threads"] = n_threads;
    j["prefix"] = prefix_len;
    j["repeats"] = repeats;
    j["cache_type_k"] = kv_type_name(kv_types.k);
    j["cache_type_v"] = kv_type_name(kv_types.v);
    if (!steps.empty()) {
      j["draft_cache_type_k"] = kv_type_name(draft_types.k);
      j["draft_cache_type_v"] = kv_type_name(draft_types.v);
    }
    j["weight_bytes"] = m.model->weight_bytes();
    j["decode_weight_bytes"] = m.model->decode_weight_bytes();
    j["packed_weight_bytes"] = m.model->packed_weight_bytes();
    j["stream_read_gbs"] = stream;
    j["decode_weight_gbs"] = weight_gbs;
    nlohmann::json passes = nlohmann::json::array();
    for (const ForwardCost& c : costs) {
      passes.push_back({{"k", c.k},
                        {"ms", c.ms},
                        {"median_ms", c.median_ms},
                        {"ratio", c.ratio},
                        {"cpu_ms", c.cpu_ms},
                        {"median_cpu_ms", c.median_cpu_ms},
                        {"cpu_ratio", c.cpu_ratio}});
    }
    j["passes"] = std::move(passes);
    if (k_slope > 1) j["verify_row_cost"] = row_cost;
    if (!steps.empty()) {
      j["draft"] = draft_path;
      nlohmann::json drafts = nlohmann::json::array();
      for (size_t i = 1; i < steps.size(); ++i) {
        const DraftLayout& l = layouts[i - 1];
        drafts.push_back({{"layout", l.name},
                          {"head_rows_scored", l.rows_scored()},
                          {"ms", steps[i].ms},
                          {"median_ms", steps[i].median_ms},
                          {"c", steps[i].ratio}});
      }
      j["target_step_ms"] = steps[0].median_ms;
      j["draft_steps"] = std::move(drafts);
    }
    std::ofstream out(json_path);
    if (!out) fail("cannot write --json file '", json_path, "'");
    out << j.dump(1) << "\n";
    if (!out) fail("writing --json file '", json_path, "' failed");
  }
  return 0;
}

}  // namespace specdec::cli
