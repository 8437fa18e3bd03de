// `specdec verify-cost -m MODEL`: the kernel-level numbers behind speculative speedups, measured
// side by side in one process: the cost of a forward pass over k = gamma + 1 tokens relative to
// one decode step, the weight bandwidth a decode step achieves, and the machine's streaming-read
// bandwidth with the same thread count (the physical limit of a memory-bound decode step).
#include <atomic>
#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/engine_setup.h"
#include "common/error.h"
#include "engine/bench_stats.h"
#include "engine/forward_cost.h"
#include "engine/loaded_model.h"
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
// bandwidth a memory-bound matrix-vector pass could at best reach. Median of `repeats`, GB/s.
double stream_read_gbs(ThreadPool& pool, int32_t repeats) {
  const size_t n = (512u << 20) / sizeof(uint64_t);
  std::vector<uint64_t> buf(n, 1);
  std::atomic<uint64_t> total{0};  // one relaxed add per chunk: no race, no measurable cost
  std::vector<double> gbs;
  for (int32_t r = 0; r <= repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(
        static_cast<int64_t>(n / 4096),
        [&](int64_t c0, int64_t c1) {
          uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
          for (size_t i = static_cast<size_t>(c0) * 4096; i < static_cast<size_t>(c1) * 4096;
               i += 4) {
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

}  // namespace

int verify_cost_command(const std::vector<std::string>& args) {
  std::string model_path, json_path;
  int32_t threads = 0, k_max = 9, prefix_len = 128, repeats = 15;
  ArgParser p("specdec verify-cost -m MODEL [options]",
              "Measures the cost of one target forward pass over k = gamma + 1 tokens (all rows'\n"
              "logits, as a verify pass computes them) divided by one decode step, on top of a\n"
              "cached prefix, with the configurations rotated and medians of repeats; also the\n"
              "weight bandwidth a decode step achieves against the machine's streaming-read\n"
              "bandwidth measured with the same threads.");
  p.add_string({"-m", "--model"}, "FILE", "GGUF model file", model_path);
  p.add_int({"-t", "--threads"}, "N", "threads (default: all cores)", threads, 0, 1024);
  p.add_int({"--k-max"}, "K", "largest pass measured, in tokens (gamma + 1)", k_max, 1, 64);
  p.add_int({"--prefix"}, "N", "cached tokens the passes run on top of", prefix_len, 1, 1 << 16);
  p.add_int({"--repeats"}, "N", "timed passes per k", repeats, 1, 10000);
  p.add_string({"--json"}, "FILE", "also write every timing as JSON", json_path);
  if (!p.parse(args)) {
    std::cout << p.help();
    return 0;
  }
  if (model_path.empty()) fail("-m MODEL is required (see specdec verify-cost --help)");
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
      measure_forward_costs(*m.model, prefix, k_max, repeats, pool);
  const double stream = stream_read_gbs(pool, 5);
  const double step_s = costs[0].median_ms / 1e3;
  const double weight_gbs = static_cast<double>(m.model->weight_bytes()) / step_s / 1e9;

  std::cout << "model: " << model_path << "\n"
            << "threads " << n_threads << ", prefix " << prefix_len << " tokens, " << repeats
            << " repeats per k (medians)\n\n";
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
            << std::setprecision(1) << static_cast<double>(m.model->weight_bytes()) / (1 << 20)
            << " MiB per step = " << std::setprecision(2) << weight_gbs << " GB/s; stream read "
            << stream << " GB/s (" << std::setprecision(0) << 100.0 * weight_gbs / stream
            << "% of it)\n";

  if (!json_path.empty()) {
    nlohmann::json j;
    j["model"] = model_path;
    j["threads"] = n_threads;
    j["prefix"] = prefix_len;
    j["repeats"] = repeats;
    j["weight_bytes"] = m.model->weight_bytes();
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
    std::ofstream out(json_path);
    if (!out) fail("cannot write --json file '", json_path, "'");
    out << j.dump(1) << "\n";
    if (!out) fail("writing --json file '", json_path, "' failed");
  }
  return 0;
}

}  // namespace specdec::cli
