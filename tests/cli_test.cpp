// The specdec command line, run as a user would: a real process, its exit code, stdout and
// stderr. Bad input must give a clear one-line error and a non-zero exit, never a crash.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "support/cli_runner.h"
#include "support/tiny_lora.h"
#include "support/tiny_model.h"
#include "tensor/cpu_features.h"

namespace specdec {
namespace {

using testing::CliResult;
using testing::run_cli;
using testing::run_cli_env;

// Exit 1 with one line "error: ..." containing fragment; anything else (a crash is 128+signal,
// an internal error 2) fails.
void expect_clean_error(const CliResult& r, const std::string& fragment) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// The distinct continuations `verify` saw for a prompt (its table's second column); -1 when the
// output has no row for it.
int verify_distinct(const std::string& out, const std::string& prompt) {
  const size_t row = out.find("\n" + prompt + " ");
  if (row == std::string::npos) return -1;
  std::istringstream fields(out.substr(row + 1));
  std::string shown;
  int distinct = -1;
  fields >> shown >> distinct;
  return distinct;
}

class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::TinyModelSpec spec;
    spec.n_ctx = 128;
    target_ = new std::string(testing::write_tiny_model(spec, testing::temp_path("target.gguf")));
    spec.seed = 2;
    spec.n_layer = 1;
    draft_ = new std::string(testing::write_tiny_model(spec, testing::temp_path("draft.gguf")));
    spec.n_vocab = 320;
    other_vocab_ =
        new std::string(testing::write_tiny_model(spec, testing::temp_path("other.gguf")));
  }
  static std::string* target_;
  static std::string* draft_;
  static std::string* other_vocab_;
};
std::string* Cli::target_ = nullptr;
std::string* Cli::draft_ = nullptr;
std::string* Cli::other_vocab_ = nullptr;

TEST_F(Cli, HelpDocumentsEveryCommandAndFlag) {
  CliResult top = run_cli({"--help"});
  EXPECT_EQ(top.exit_code, 0);
  for (const char* c : {"run", "info", "models", "verify", "make-draft"}) {
    EXPECT_NE(top.out.find(c), std::string::npos) << c;
  }
  CliResult run = run_cli({"run", "--help"});
  EXPECT_EQ(run.exit_code, 0);
  for (const char* f : {"-m", "-md", "--draft-max", "-p", "-n", "--temp", "--top-p", "--top-k",
                        "--min-p", "-s", "-t", "-c", "--stop", "--stats-json", "--chat"}) {
    const bool listed = run.out.find(std::string(" ") + f + " ") != std::string::npos ||
                        run.out.find(std::string(" ") + f + ",") != std::string::npos;
    EXPECT_TRUE(listed) << f;
  }
}

TEST_F(Cli, InfoDescribesTheModel) {
  CliResult r = run_cli({"info", "-m", *target_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"architecture:  llama", "layers:        2", "F32", "byte-level BPE",
                        "chat template: chatml", "memory:", "kernels:       "}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  // The kernel path in use is named, and it is one this CPU runs.
  const std::string in_use(isa_name(active_isa()));
  EXPECT_NE(r.out.find("kernels:       " + in_use + " (this CPU runs:"), std::string::npos)
      << r.out;
}

// SPECDEC_ISA caps the kernel path (read once per process); an unknown value is reported and
// ignored, never fatal. (SPECDEC_FORCE_SCALAR is emptied, which means unset, so that a caller's
// setting cannot decide the outcome.)
TEST_F(Cli, IsaEnvironmentCapsTheKernelPath) {
  const Isa best = best_supported(Isa::kAvx512Vnni);
  CliResult scalar =
      run_cli_env({"SPECDEC_ISA=scalar", "SPECDEC_FORCE_SCALAR="}, {"info", "-m", *target_});
  ASSERT_EQ(scalar.exit_code, 0) << scalar.err;
  EXPECT_NE(scalar.out.find("kernels:       scalar (this CPU runs:"), std::string::npos)
      << scalar.out;
  if (cpu_supports(Isa::kAvx2)) {
    CliResult avx2 =
        run_cli_env({"SPECDEC_ISA=avx2", "SPECDEC_FORCE_SCALAR="}, {"info", "-m", *target_});
    ASSERT_EQ(avx2.exit_code, 0) << avx2.err;
    EXPECT_NE(avx2.out.find("kernels:       avx2 (this CPU runs:"), std::string::npos) << avx2.out;
  }
  CliResult bogus =
      run_cli_env({"SPECDEC_ISA=avx9000", "SPECDEC_FORCE_SCALAR="}, {"info", "-m", *target_});
  ASSERT_EQ(bogus.exit_code, 0) << bogus.err;
  EXPECT_NE(bogus.err.find("ignoring SPECDEC_ISA=avx9000"), std::string::npos) << bogus.err;
  EXPECT_NE(bogus.out.find("kernels:       " + std::string(isa_name(best)) + " (this CPU runs:"),
            std::string::npos)
      << bogus.out;
}

TEST_F(Cli, RunGreedyIsReproducibleAndSpeculationDoesNotChangeIt) {
  std::vector<std::string> base = {"run", "-m",     *target_, "-p",           "hello", "-n",
                                   "20",  "--temp", "0",      "--ignore-eos", "-t",    "2"};
  CliResult a = run_cli(base);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_NE(a.err.find("generated: 20 tokens"), std::string::npos) << a.err;
  std::vector<std::string> spec = base;
  spec.insert(spec.end(), {"-md", *draft_, "--draft-max", "3", "--stats-json",
                           testing::temp_path("stats.json")});
  CliResult b = run_cli(spec);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(b.err.find("speculative: gamma 3"), std::string::npos) << b.err;
}

// --prompt-cache: the second run restores the first one's prompt K/V, reads only what it does
// not hold, and writes the same text; a file from another model is refused.
TEST_F(Cli, PromptCacheReusesTheSavedPromptAndKeepsTheText) {
  const std::string cache = testing::temp_path("prompt-cache.bin");
  const std::string prompt = "a long shared preamble, " + std::string(120, 'x');
  std::vector<std::string> base = {"run",  "-m", *target_, "-md",          *draft_,  "-p",
                                   prompt, "-n", "12",     "--ignore-eos", "--temp", "0"};
  CliResult plain = run_cli(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  std::vector<std::string> cached = base;
  cached.insert(cached.end(), {"--prompt-cache", cache});
  CliResult first = run_cli(cached);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, plain.out);
  EXPECT_NE(first.err.find("prompt cache: saved"), std::string::npos) << first.err;
  EXPECT_EQ(first.err.find("from the cache"), std::string::npos) << first.err;
  CliResult second = run_cli(cached);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, plain.out);
  EXPECT_NE(second.err.find("from the cache"), std::string::npos) << second.err;
  // Read only: the file stays as it was; --prompt-cache-all keeps the answer's rows too.
  const auto size = std::filesystem::file_size(cache);
  CliResult ro = run_cli([&] {
    auto a = cached;
    a.insert(a.end(), {"-n", "20", "--prompt-cache-ro"});
    return a;
  }());
  ASSERT_EQ(ro.exit_code, 0) << ro.err;
  EXPECT_EQ(std::filesystem::file_size(cache), size);
  auto all = cached;
  all.push_back("--prompt-cache-all");
  ASSERT_EQ(run_cli(all).exit_code, 0);
  EXPECT_GT(std::filesystem::file_size(cache), size);
  // Refusals: another target, the cache flags alone, both at once.
  expect_clean_error(
      run_cli({"run", "-m", *draft_, "-p", prompt, "-n", "2", "--prompt-cache", cache}),
      "another model");
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--prompt-cache-ro"}),
                     "need --prompt-cache");
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--prompt-cache", cache,
                              "--prompt-cache-ro", "--prompt-cache-all"}),
                     "give one of them");
}

// --regex: the whole output matches, with or without speculation (the same greedy text).
TEST_F(Cli, RegexConstrainsTheWholeOutput) {
  std::vector<std::string> base = {"run",
                                   "-m",
                                   *target_,
                                   "-p",
                                   "hello",
                                   "-n",
                                   "40",
                                   "--temp",
                                   "0",
                                   "-t",
                                   "2",
                                   "--regex",
                                   "(ab|cd){3}[0-9]{2}!"};
  CliResult a = run_cli(base);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  // The CLI ends its output with a newline of its own.
  const std::string text = a.out.substr(0, a.out.size() - (a.out.ends_with('\n') ? 1 : 0));
  EXPECT_TRUE(std::regex_match(text, std::regex("(ab|cd){3}[0-9]{2}!"))) << a.out;
  std::vector<std::string> spec = base;
  spec.insert(spec.end(), {"-md", *draft_, "--draft-max", "3"});
  CliResult b = run_cli(spec);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--regex", "(a)\\1"}),
                     "--regex: regex at character 3: backreferences are not supported");
  expect_clean_error(
      run_cli({"run", "-m", *target_, "-p", "x", "--regex", "a", "--grammar", "root ::= \"a\""}),
      "give one of --grammar, --grammar-file, --json-schema, --json-schema-file and --regex");
}

// The draft levers (a vocabulary subset, requantized weights, adaptive length, hybrid lookup)
// change speed, never the greedy text; each alone and all together.
TEST_F(Cli, DraftLeversKeepTheGreedyText) {
  std::vector<std::string> base = {"run", "-m",     *target_, "-p",           "hello hello", "-n",
                                   "24",  "--temp", "0",      "--ignore-eos", "-t",          "2"};
  CliResult plain = run_cli(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const std::vector<std::vector<std::string>> levers = {
      {"--draft-vocab", "40"},
      {"--draft-vocab", "0"},
      {"--draft-type", "q4_0", "--draft-head-type", "q8_0"},
      {"--draft-type", "file"},
      {"--draft-type", "AUTO"},
      {"--draft-policy", "adaptive", "--draft-cost", "0.1", "--draft-verify-cost", "0.05"},
      {"--draft-policy", "confidence", "--draft-max", "6"},
      {"--draft-pass-costs", "1.1,1.2,1.9,2", "--draft-max", "6"},
      {"--draft-hybrid"},
      {"--draft-vocab", "64", "--draft-policy", "adaptive", "--draft-hybrid", "--ngram-min", "2"}};
  for (const auto& lever : levers) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"-md", *draft_, "--draft-max", "4"});
    args.insert(args.end(), lever.begin(), lever.end());
    CliResult r = run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, plain.out) << lever.front();
  }
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--draft-hybrid"}),
                     "--draft-hybrid needs a draft model");
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--draft-vocab", "-3"}),
                     "--draft-vocab");
  // Bad draft-model flags, each with the draft given: {flag, value, what the error says}.
  const std::vector<std::array<std::string, 3>> bad_draft_flags = {
      {"--draft-policy", "sometimes", "--draft-policy must be fixed, adaptive or confidence"},
      {"--draft-pass-costs", "1.2,0.5", "--draft-pass-costs values must be in [1, 100]"},
      {"--draft-pass-costs", "1.2,,1.4", "--draft-pass-costs has an empty item"},
      {"--draft-type", "f16", "--draft-type must be auto, file, q4_0"},
      {"--draft-head-type", "q3_k", "--draft-head-type must be file, q4_0"},
      {"--draft-head-type", "auto", "--draft-head-type must be file, q4_0"}};
  for (const auto& [flag, value, message] : bad_draft_flags) {
    expect_clean_error(run_cli({"run", "-m", *target_, "-md", *draft_, "-p", "x", flag, value}),
                       message);
  }
}

// A model's KV cache size in a run's --stats-json ("target" or "draft").
int64_t kv_cache_bytes(const std::string& stats_path, const char* model) {
  const nlohmann::json j = nlohmann::json::parse(testing::read_file(stats_path));
  return j["memory"][model]["kv_cache_bytes"].get<int64_t>();
}

// f16 KV caches: speculation keeps the text of a target-only run on the same cache type, the
// memory report shows the cache at half its f32 size, and a bad type is a one-line error.
TEST_F(Cli, F16KvCachesKeepSpeculationExactAndHalveTheCache) {
  const std::string f32_stats = testing::temp_path("f32.json"),
                    f16_stats = testing::temp_path("f16.json");
  const std::vector<std::string> base = {"run", "-m", *target_, "-p",  "hello hello",
                                         "-n",  "24", "--temp", "0",   "--ignore-eos",
                                         "-t",  "2",  "-c",     "128", "-q"};
  std::vector<std::string> f16 = base;
  f16.insert(f16.end(), {"-ctk", "f16", "--cache-type-v", "f16"});
  CliResult plain = run_cli(f16);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  f16.insert(f16.end(), {"-md", *draft_, "--draft-max", "4", "--stats-json", f16_stats});
  CliResult spec = run_cli(f16);
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  EXPECT_EQ(spec.out, plain.out);
  std::vector<std::string> f32 = base;
  f32.insert(f32.end(), {"-md", *draft_, "--stats-json", f32_stats});
  ASSERT_EQ(run_cli(f32).exit_code, 0);
  EXPECT_EQ(kv_cache_bytes(f16_stats, "target") * 2, kv_cache_bytes(f32_stats, "target"));
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "-ctk", "q4_0"}),
                     "--cache-type-k must be f32, f16 or q8_0, got 'q4_0'");
}

// q8_0 KV caches: the same on a model with 32-wide heads (the cache at 17/64 of f32's: 8-bit
// values plus an fp16 scale per 32); on this suite's 16-wide heads a clean error.
TEST_F(Cli, Q8KvCachesKeepSpeculationExactAndNeedHeadsOf32) {
  testing::TinyModelSpec spec;
  spec.n_ctx = 128;
  spec.n_embd = 128;
  const std::string target = testing::write_tiny_model(spec, testing::temp_path("t32.gguf"));
  spec.seed = 2;
  spec.n_layer = 1;
  const std::string draft = testing::write_tiny_model(spec, testing::temp_path("d32.gguf"));
  const std::string f32_stats = testing::temp_path("q8-f32.json"),
                    q8_stats = testing::temp_path("q8.json");
  const std::vector<std::string> base = {"run", "-m", target,   "-p",  "hello hello",
                                         "-n",  "24", "--temp", "0",   "--ignore-eos",
                                         "-t",  "2",  "-c",     "128", "-q"};
  std::vector<std::string> q8 = base;
  q8.insert(q8.end(), {"-ctk", "q8_0", "-ctv", "q8_0"});
  const CliResult plain = run_cli(q8);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  q8.insert(q8.end(), {"-md", draft, "--draft-max", "4", "--stats-json", q8_stats});
  const CliResult spec_run = run_cli(q8);
  ASSERT_EQ(spec_run.exit_code, 0) << spec_run.err;
  EXPECT_EQ(spec_run.out, plain.out);
  std::vector<std::string> f32 = base;
  f32.insert(f32.end(), {"-md", draft, "--stats-json", f32_stats});
  ASSERT_EQ(run_cli(f32).exit_code, 0);
  EXPECT_EQ(kv_cache_bytes(q8_stats, "target") * 64, kv_cache_bytes(f32_stats, "target") * 17);
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "-ctv", "q8_0"}),
                     "a q8_0 KV cache needs a head size that is a multiple of 32; this model's "
                     "is 16 (use f16 or f32)");
}

// -ctkd/-ctvd: the draft's caches in q8_0 (its heads 32 wide) beside the suite's f32 target
// (16-wide heads, which q8_0 refuses): the text stays target-only text, the memory report shows
// the draft's cache at 17/64 of f32 and the target's unchanged, a bad type names its flag.
TEST_F(Cli, DraftCacheTypesAreTheDraftsOwn) {
  testing::TinyModelSpec spec;
  spec.n_ctx = 128;
  spec.n_embd = 128;
  spec.seed = 2;
  spec.n_layer = 1;
  const std::string draft = testing::write_tiny_model(spec, testing::temp_path("dq8.gguf"));
  const std::string f32_stats = testing::temp_path("dq8-f32.json"),
                    q8_stats = testing::temp_path("dq8-q8.json");
  const std::vector<std::string> base = {"run", "-m", *target_, "-p",  "hello hello",
                                         "-n",  "24", "--temp", "0",   "--ignore-eos",
                                         "-t",  "2",  "-c",     "128", "-q"};
  const CliResult plain = run_cli(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  std::vector<std::string> q8 = base;
  q8.insert(q8.end(), {"-md", draft, "--draft-max", "4", "-ctkd", "q8_0", "--cache-type-v-draft",
                       "q8_0", "--stats-json", q8_stats});
  const CliResult spec_run = run_cli(q8);
  ASSERT_EQ(spec_run.exit_code, 0) << spec_run.err;
  EXPECT_EQ(spec_run.out, plain.out);
  std::vector<std::string> f32 = base;
  f32.insert(f32.end(), {"-md", draft, "--stats-json", f32_stats});
  ASSERT_EQ(run_cli(f32).exit_code, 0);
  EXPECT_EQ(kv_cache_bytes(q8_stats, "draft") * 64, kv_cache_bytes(f32_stats, "draft") * 17);
  EXPECT_EQ(kv_cache_bytes(q8_stats, "target"), kv_cache_bytes(f32_stats, "target"));
  const auto memory = [&q8_stats](const char* model) {
    return nlohmann::json::parse(testing::read_file(q8_stats))["memory"][model];
  };
  EXPECT_EQ(memory("draft")["kv_cache_type_k"], "q8_0");
  EXPECT_EQ(memory("draft")["kv_cache_type_v"], "q8_0");
  EXPECT_EQ(memory("target")["kv_cache_type_k"], "f32");
  expect_clean_error(run_cli({"run", "-m", *target_, "-md", draft, "-p", "x", "-ctvd", "q4"}),
                     "--cache-type-v-draft must be f32, f16 or q8_0, got 'q4'");
  // Without a draft model the flags would change nothing: refused, not ignored.
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "-ctkd", "q8_0"}),
                     "give -md DRAFT too");
  for (const char* cmd : {"chat", "serve", "verify-cost"}) {
    expect_clean_error(run_cli({cmd, "-m", *target_, "-ctkd", "q8_0"}), "give -md DRAFT too");
  }
  expect_clean_error(run_cli({"run", "-m", *target_, "--draft-ngram", "-p", "x", "-ctvd", "f16"}),
                     "give -md DRAFT too");
}

TEST_F(Cli, SampledRunsRepeatWithTheSameSeed) {
  std::vector<std::string> args = {"run",    "-m",  *target_, "-p", "abc",          "-n",  "16",
                                   "--temp", "1.0", "-s",     "7",  "--ignore-eos", "-md", *draft_};
  CliResult a = run_cli(args), b = run_cli(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST_F(Cli, StatsJsonHoldsThePerRoundLog) {
  const std::string path = testing::temp_path("stats.json");
  CliResult r = run_cli({"run", "-m", *target_, "-md", *draft_, "-p", "x", "-n", "12", "--temp",
                         "0.7", "--ignore-eos", "--stats-json", path, "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;  // -q
  const std::string json = testing::read_file(path);
  for (const char* key :
       {"\"speculative_stats\"", "\"per_round\"", "\"accepted_histogram\"", "\"target_entropy\"",
        "\"acceptance_rate\"", "\"draft_ms\"", "\"verify_ms\"", "\"generated_tokens\": 12"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << "\n" << json;
  }
}

// `specdec models` lists what is on the machine and the pair it can run; `-m ollama:NAME` runs a
// model from Ollama's store like its file.
TEST_F(Cli, ModelsFindsTheMachinesModelsAndOllamaReferencesRunThem) {
  namespace fs = std::filesystem;
  const fs::path root = testing::temp_path("machine");
  const fs::path dir = root / "models", ollama = root / "ollama";
  fs::create_directories(dir);
  fs::create_directories(ollama / "blobs");
  fs::copy_file(*target_, dir / "target.gguf");
  fs::copy_file(*draft_, dir / "draft.gguf");
  fs::copy_file(*other_vocab_, dir / "other.gguf");
  const std::string digest(64, 'e');
  // Ollama's blob is the directory's file (a link): one model under two names.
  fs::create_symlink(dir / "target.gguf", ollama / "blobs" / ("sha256-" + digest));
  fs::create_directories(ollama / "manifests/registry.ollama.ai/library/tiny");
  std::ofstream(ollama / "manifests/registry.ollama.ai/library/tiny/1b")
      << R"({"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:)"
      << digest << R"("}]})";
  const std::vector<std::string> env = {"OLLAMA_MODELS=" + ollama.string(),
                                        "HF_HUB_CACHE=" + (root / "no-hub").string(),
                                        "SPECDEC_MODELS=" + dir.string()};
  const CliResult list = run_cli_env(env, {"models", "--max-ratio", "0.9"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("ollama:tiny:1b"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("(also " + (dir / "target.gguf").string() + ")"), std::string::npos)
      << list.out;  // the same file under two names is one model
  EXPECT_NE(list.out.find("specdec run -m ollama:tiny:1b -md " + (dir / "draft.gguf").string()),
            std::string::npos)
      << list.out;
  EXPECT_EQ(list.out.find("-md " + (dir / "other.gguf").string()), std::string::npos) << list.out;
  // The default share (0.5) leaves out a draft this close to the target's size.
  EXPECT_EQ(run_cli_env(env, {"models"}).out.find("specdec run"), std::string::npos);

  const CliResult via_ollama = run_cli_env(
      env, {"run", "-m", "ollama:tiny:1b", "-p", "hello", "-n", "8", "--temp", "0", "-q"});
  const CliResult via_file =
      run_cli({"run", "-m", *target_, "-p", "hello", "-n", "8", "--temp", "0", "-q"});
  ASSERT_EQ(via_ollama.exit_code, 0) << via_ollama.err;
  EXPECT_EQ(via_ollama.out, via_file.out);
  expect_clean_error(run_cli_env(env, {"run", "-m", "ollama:absent", "-p", "x"}),
                     "no Ollama model absent:latest in " + ollama.string());
  // A Modelfile's ADAPTER: the model runs with the adapter applied, as `--lora` applies it.
  testing::TinyModelSpec spec;
  spec.n_ctx = 128;  // the fixture's target
  const std::string adapter_digest(64, 'a');
  testing::write_tiny_lora(spec, testing::TinyLoraSpec{},
                           (ollama / "blobs" / ("sha256-" + adapter_digest)).string());
  std::ofstream(ollama / "manifests/registry.ollama.ai/library/tiny/lora")
      << R"({"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:)"
      << digest << R"("},{"mediaType":"application/vnd.ollama.image.adapter","digest":"sha256:)"
      << adapter_digest << R"("}]})";
  const CliResult adapted = run_cli_env(
      env, {"run", "-m", "ollama:tiny:lora", "-p", "hello", "-n", "8", "--temp", "0", "-q"});
  ASSERT_EQ(adapted.exit_code, 0) << adapted.err;
  EXPECT_NE(adapted.out, via_file.out);
  EXPECT_EQ(adapted.out,
            run_cli({"run", "-m", *target_, "-p", "hello", "-n", "8", "--temp", "0", "-q", "--lora",
                     (ollama / "blobs" / ("sha256-" + adapter_digest)).string()})
                .out);
  expect_clean_error(run_cli({"run", "-m", "tiny:1b", "-p", "x"}), "write ollama:tiny:1b");
}

TEST_F(Cli, BadFlagsGiveOneLineErrors) {
  expect_clean_error(run_cli({"run"}), "-m MODEL is required");
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--temp", "hot"}),
                     "--temp expects a number");
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--top-p", "1.5"}),
                     "--top-p must be in [0, 1]");
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--frobnicate"}),
                     "unknown argument '--frobnicate'");
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--typical", "-1"}),
                     "typical_p must be a number >= 0");
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--xtc-probability", "2"}),
                     "xtc_probability must be in [0, 1]");
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--dry-multiplier", "-1"}),
                     "dry_multiplier must be a number >= 0");
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--dry-penalty-last-n", "-5"}),
                     "dry_penalty_last_n must be >= -1");
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--top-nsigma", "inf"}),
                     "--top-nsigma expects a number");
  expect_clean_error(run_cli({"run", "-m", *target_}), "a prompt is required");
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--presence-penalty", "3"}),
                     "presence penalty must be in [-2, 2]");
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--repeat-penalty", "0"}),
                     "repetition penalty must be in (0, 10]");
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--repeat-last-n", "-2"}),
                     "--repeat-last-n must be >= 0, or -1 (all)");
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--logit-bias", "12"}),
                     "--logit-bias wants TOKEN+BIAS or TOKEN-BIAS");
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--logit-bias", "5+200"}),
                     "logit bias of token 5 must be in [-100, 100]");
  // The vocabulary is known once the model is loaded (the tiny one has 300 tokens).
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--logit-bias", "300+1"}),
                     "logit bias names token 300, outside the vocabulary of 300 tokens");
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--suffix", "y"}),
                     "this model has no fill-in-the-middle tokens");
  expect_clean_error(run_cli({"run", "-m", *target_, "-p", "x", "--suffix", "y", "--chat"}),
                     "--suffix and --chat are mutually exclusive");
  CliResult unknown = run_cli({"frobnicate"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(unknown.err.rfind("error: unknown command 'frobnicate'", 0), 0u) << unknown.err;
}

TEST_F(Cli, BadModelFilesGiveOneLineErrors) {
  expect_clean_error(run_cli({"info", "-m", "/nonexistent/model.gguf"}), "cannot open");
  const std::string garbage = testing::temp_path("garbage.gguf");
  std::ofstream(garbage) << "this is not a gguf file at all";
  expect_clean_error(run_cli({"run", "-m", garbage, "-p", "x"}), "magic");
  // A truncated copy of a valid model.
  const std::string whole = testing::read_file(*target_);
  const std::string cut = testing::temp_path("cut.gguf");
  std::ofstream(cut, std::ios::binary) << whole.substr(0, whole.size() / 2);
  expect_clean_error(run_cli({"run", "-m", cut, "-p", "x"}), "cut.gguf");
  // An architecture we do not support.
  testing::TinyModelSpec spec;
  spec.edit = [](gguf::GgufWriter& w) { w.set_string("general.architecture", "mamba"); };
  const std::string mamba = testing::write_tiny_model(spec, testing::temp_path("mamba.gguf"));
  expect_clean_error(run_cli({"info", "-m", mamba}), "unsupported architecture 'mamba'");
}

TEST_F(Cli, PromptLongerThanTheContextIsRefused) {
  expect_clean_error(run_cli({"run", "-m", *target_, "-c", "16", "-p", std::string(200, 'z')}),
                     "but the context holds 16");
}

TEST_F(Cli, DraftWithAnotherVocabularyIsRefused) {
  expect_clean_error(
      run_cli({"run", "-m", *target_, "-md", *other_vocab_, "-p", "x"}),
      "draft and target vocabularies differ: the draft has 320 tokens, the target 300");
  // Same size, one token spelled differently.
  testing::TinyModelSpec spec;
  spec.n_ctx = 128;
  spec.edit = [](gguf::GgufWriter& w) {
    std::vector<std::string> tokens;
    for (int i = 0; i < 300; ++i) tokens.push_back("tok" + std::to_string(i));
    w.set_array_strings("tokenizer.ggml.tokens", tokens);
  };
  const std::string renamed = testing::write_tiny_model(spec, testing::temp_path("renamed.gguf"));
  CliResult r = run_cli({"run", "-m", *target_, "-md", renamed, "-p", "x"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("draft and target vocabularies differ: token 0 is"), std::string::npos)
      << r.err;
}

TEST_F(Cli, VerifyPassesOnALosslessSetup) {
  CliResult r = run_cli({"verify", "-m", *target_, "-md", *draft_, "--samples", "150", "-n", "2",
                         "--top-k", "6", "-p", "ab", "-t", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("distribution check: PASS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("acceptance check:   PASS"), std::string::npos) << r.out;
}

// The self-check with penalties: each verify row's p depends on the drafts before it, and the
// two samples must still come from one distribution.
TEST_F(Cli, VerifyPassesWithPenaltiesAndLogitBias) {
  CliResult r = run_cli({"verify", "-m",
                         *target_, "-md",
                         *draft_,  "--samples",
                         "150",    "-n",
                         "3",      "--top-k",
                         "6",      "-p",
                         "ab",     "-t",
                         "1",      "--frequency-penalty",
                         "1.5",    "--repeat-penalty",
                         "1.5",    "--logit-bias",
                         "98+2"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("frequency penalty 1.5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("distribution check: PASS"), std::string::npos) << r.out;
  // llama.cpp's window: the last 2 tokens of prompt and text, sliding within a round.
  CliResult w = run_cli({"verify", "-m",
                         *target_, "-md",
                         *draft_,  "--samples",
                         "150",    "-n",
                         "3",      "--top-k",
                         "6",      "-p",
                         "ab",     "-t",
                         "1",      "--frequency-penalty",
                         "1.5",    "--repeat-penalty",
                         "1.5",    "--repeat-last-n",
                         "2"});
  EXPECT_EQ(w.exit_code, 0) << w.out << w.err;
  EXPECT_NE(w.out.find("(penalties over the last 2 tokens of prompt and text)"), std::string::npos)
      << w.out;
  EXPECT_NE(w.out.find("distribution check: PASS"), std::string::npos) << w.out;
}

TEST_F(Cli, VerifyPassesWithTypicalTopNSigmaAndXtc) {
  CliResult r = run_cli({"verify", "-m",
                         *target_, "-md",
                         *draft_,  "--samples",
                         "150",    "-n",
                         "3",      "--top-k",
                         "8",      "-p",
                         "ab",     "-t",
                         "1",      "--typical",
                         "0.8",    "--top-nsigma",
                         "2.5",    "--xtc-probability",
                         "0.5",    "--xtc-threshold",
                         "0.05",   "--dynatemp-range",
                         "0.5"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("typical 0.8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("XTC 0.5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dynamic temperature +-0.5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("distribution check: PASS"), std::string::npos) << r.out;
}

// Mirostat from the command line: speculative and target-only continuations agree in
// distribution (mu carried through each round's verify rows), and a bad version is refused.
// llama.cpp's sampler sequence: the temperature last (top-p and min-p measured at temperature 1)
// is the distribution the speculative output must follow, and --samplers says so.
TEST_F(Cli, VerifyPassesWithTheTemperatureLast) {
  const std::vector<std::string> check = {"verify",    "-m",  *target_, "-md",    *draft_,
                                          "--samples", "150", "-n",     "3",      "-p",
                                          "ab",        "-t",  "1",      "--temp", "0.5"};
  std::vector<std::string> args = check;
  // Top-k 3 keeps the tiny model's flat rows to a few continuations, so the check has cells.
  for (const char* a : {"--top-k", "3", "--top-p", "0.8", "--min-p", "0.1", "--samplers",
                        "top_k;top_p;min_p;temperature"}) {
    args.emplace_back(a);
  }
  CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("top-p 0.8000, min-p 0.1000 (temperature last)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("distribution check: PASS"), std::string::npos) << r.out;
  // The check compared something: more than one distinct continuation, fewer than the samples.
  const int distinct = verify_distinct(r.out, "ab");
  EXPECT_GE(distinct, 2) << r.out;
  EXPECT_LE(distinct, 27) << r.out;
  // The letters say the same; a stage left out is off (top-p here).
  args = check;
  for (const char* a : {"--top-p", "0.8", "--min-p", "0.1", "--sampling-seq", "kmt"}) {
    args.emplace_back(a);
  }
  CliResult letters = run_cli(args);
  EXPECT_EQ(letters.exit_code, 0) << letters.out << letters.err;
  EXPECT_NE(letters.out.find("top-p 1.0000, min-p 0.1000 (temperature last)"), std::string::npos)
      << letters.out;
  // An order the engine does not apply, and a name it does not know: errors, not a silent order.
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--samplers", "top_k;top_p;temperature;min_p"},
        std::vector<std::string>{"--samplers", "top_k;tail_free"},
        std::vector<std::string>{"--sampling-seq", "kq"}}) {
    std::vector<std::string> args{"run", "-m", *target_, "-p", "ab", "-n", "2"};
    args.insert(args.end(), flags.begin(), flags.end());
    CliResult bad = run_cli(args);
    EXPECT_NE(bad.exit_code, 0) << flags[1];
    EXPECT_NE(bad.err.find(flags[0].substr(2, 8)), std::string::npos) << bad.err;
  }
}

TEST_F(Cli, VerifyPassesWithMirostat) {
  for (const char* version : {"1", "2"}) {
    // T 0.2 sharpens the tiny model's flat rows so that the cut keeps a few tokens each.
    CliResult r = run_cli({"verify", "-m",
                           *target_, "-md",
                           *draft_,  "--samples",
                           "150",    "-n",
                           "3",      "-p",
                           "ab",     "-t",
                           "1",      "--temp",
                           "0.2",    "--mirostat",
                           version,  "--mirostat-ent",
                           "2",      "--mirostat-lr",
                           "0.5"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    // The check compared something: more than one distinct continuation.
    EXPECT_GE(verify_distinct(r.out, "ab"), 5) << r.out;
    EXPECT_NE(r.out.find(std::string("Mirostat ") + version + " (tau 2"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("distribution check: PASS"), std::string::npos) << r.out;
  }
  CliResult bad = run_cli({"run", "-m", *target_, "-p", "ab", "--mirostat", "3"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("mirostat must be 0 (off), 1 or 2"), std::string::npos) << bad.err;
}

// DRY over a prompt that repeats itself, with a breaker given on the command line: exact under
// speculation, and it changes the greedy text.
TEST_F(Cli, DryIsExactUnderSpeculationAndChangesTheText) {
  CliResult r = run_cli({"verify",     "-m",
                         *target_,     "-md",
                         *draft_,      "--samples",
                         "150",        "-n",
                         "3",          "--top-k",
                         "8",          "-p",
                         "ab ab ab a", "-t",
                         "1",          "--dry-multiplier",
                         "2",          "--dry-allowed-length",
                         "1",          "--dry-sequence-breaker",
                         "\\n"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("DRY 2.0000 x 1.7500^(run - 1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("distribution check: PASS"), std::string::npos) << r.out;
  const std::vector<std::string> base = {"run", "-m",     *target_, "-p", "ab ab ab a",  "-n",
                                         "24",  "--temp", "0",      "-q", "--ignore-eos"};
  std::vector<std::string> dry = base;
  for (const char* a : {"--dry-multiplier", "50", "--dry-allowed-length", "1"}) dry.push_back(a);
  std::vector<std::string> dry_spec = dry;
  dry_spec.push_back("-md");
  dry_spec.push_back(*draft_);
  const CliResult plain = run_cli(base), with = run_cli(dry), with_spec = run_cli(dry_spec);
  ASSERT_EQ(with.exit_code, 0) << with.err;
  EXPECT_NE(with.out, plain.out);
  EXPECT_EQ(with_spec.out, with.out);
}

TEST_F(Cli, MakeDraftWritesALoadableSelfDraft) {
  const std::string out = testing::temp_path("self_draft.gguf");
  CliResult r = run_cli({"make-draft", "-m", *target_, "--layers", "1", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  CliResult info = run_cli({"info", "-m", out});
  EXPECT_NE(info.out.find("layers:        1"), std::string::npos) << info.out;
  expect_clean_error(run_cli({"make-draft", "-m", *target_, "--layers", "5", "-o", out}),
                     "draft layer count must be in [1, 1]");
}

TEST_F(Cli, VerifyCostTimesEveryPassWidthAndReportsBandwidth) {
  const std::string json = testing::temp_path("verify_cost.json");
  CliResult r = run_cli({"verify-cost", "-m", *target_, "--prefix", "16", "--k-max", "3",
                         "--repeats", "2", "-t", "1", "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* row : {"| 1 | 0 | ", "| 2 | 1 | ", "| 3 | 2 | "}) {
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("decode step: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stream read "), std::string::npos) << r.out;
  const std::string j = testing::read_file(json);
  EXPECT_NE(j.find("\"passes\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"stream_read_gbs\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"cpu_ratio\""), std::string::npos) << j;
  // The bandwidth is what a step streams over its time: every weight but the embedding table.
  const nlohmann::json doc = nlohmann::json::parse(j);
  const auto step_bytes = doc["decode_weight_bytes"].get<double>();
  EXPECT_EQ(doc["weight_bytes"].get<double>() - step_bytes, 300.0 * 64 * sizeof(float));
  EXPECT_NEAR(doc["decode_weight_gbs"].get<double>(),
              step_bytes / (doc["passes"][0]["median_ms"].get<double>() / 1e3) / 1e9,
              1e-6 * doc["decode_weight_gbs"].get<double>());

  expect_clean_error(run_cli({"verify-cost", "-m", *target_}),  // 128 + 9 > the 128-token context
                     "exceeds the model's context of 128 tokens");
  expect_clean_error(run_cli({"verify-cost", "-m", *target_, "--k-max", "0"}), "--k-max");
  expect_clean_error(run_cli({"verify-cost"}), "-m MODEL is required");
}

// perplexity: windows of -c tokens, a running value per window, the final estimate; the JSON
// holds the same numbers, and the value does not depend on the threads or the batch size.
TEST_F(Cli, PerplexityScoresATextInWindows) {
  const std::string text_file = testing::temp_path("ppl.txt");
  {
    std::ofstream out(text_file);
    for (int i = 0; i < 40; ++i) out << "The quick brown fox jumps over the lazy dog " << i << ". ";
  }
  const std::string json = testing::temp_path("ppl.json");
  CliResult r = run_cli({"perplexity", "-m", *target_, "-f", text_file, "-c", "64", "--chunks", "3",
                         "-t", "2", "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[1]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[3]"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("[4]"), std::string::npos) << r.out;
  const size_t at = r.out.find("Final estimate: PPL = ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const double ppl = std::stod(r.out.substr(at + 22));
  // A random tiny model over 300 tokens: far from certain, no worse than chance by much.
  EXPECT_GT(ppl, 1.0);
  EXPECT_LT(ppl, 3000.0);
  EXPECT_NE(r.out.find("93 tokens scored in 3 windows"), std::string::npos) << r.out;
  const std::string j = testing::read_file(json);
  EXPECT_NE(j.find("\"scored_tokens\": 93"), std::string::npos) << j;
  CliResult other = run_cli({"perplexity", "-m", *target_, "-f", text_file, "-c", "64", "--chunks",
                             "3", "-t", "1", "-b", "7"});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  const auto final_line = [](const std::string& out) {
    const size_t a = out.find("Final estimate");
    return a == std::string::npos ? std::string() : out.substr(a, out.find('\n', a) - a);
  };
  EXPECT_EQ(final_line(other.out), final_line(r.out));

  expect_clean_error(run_cli({"perplexity", "-m", *target_}), "needs -m MODEL and -f TEXT");
  expect_clean_error(run_cli({"perplexity", "-m", *target_, "-f", "/nonexistent.txt"}),
                     "cannot read text file");
  expect_clean_error(run_cli({"perplexity", "-m", *target_, "-f", text_file, "-c", "256"}),
                     "exceeds the model's context of 128 tokens");
  const std::string short_file = testing::temp_path("short.txt");
  std::ofstream(short_file) << "too short";
  expect_clean_error(run_cli({"perplexity", "-m", *target_, "-f", short_file, "-c", "64"}),
                     "fewer than one window of 64");
}

// embed: a unit vector per line of the input, the same bits however many texts come along and
// whatever the threads; per-token vectors with --pooling none, whose last is the last pooling's
// before normalization; OpenAI's shape with --embd-output-format json.
TEST_F(Cli, EmbedPrintsAVectorPerText) {
  using nlohmann::json;
  CliResult two = run_cli({"embed", "-m", *target_, "-p", "first text\nsecond one", "-t", "2"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  const json vectors = json::parse(two.out);
  ASSERT_EQ(vectors.size(), 2u);
  ASSERT_EQ(vectors[0].size(), 64u);  // the tiny model's n_embd
  double norm = 0;
  for (double x : vectors[1]) norm += x * x;
  EXPECT_NEAR(norm, 1.0, 1e-5);
  EXPECT_NE(vectors[0], vectors[1]);
  CliResult one = run_cli({"embed", "-m", *target_, "-p", "second one", "-t", "1"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(json::parse(one.out)[0], vectors[1]);
  EXPECT_NE(two.err.find("embed: 2 text(s)"), std::string::npos) << two.err;

  CliResult rows = run_cli({"embed", "-m", *target_, "-p", "second one", "--pooling", "none"});
  ASSERT_EQ(rows.exit_code, 0) << rows.err;
  // The summary line names the token count: "embed: 1 text(s), N tokens, ...".
  const auto tokens_of = [](const std::string& err) {
    const size_t at = err.find("text(s), ");
    return at == std::string::npos ? -1 : std::stoi(err.substr(at + 9));
  };
  const json per_token = json::parse(rows.out);
  EXPECT_EQ(static_cast<int>(per_token.size()), tokens_of(rows.err));  // one per token
  EXPECT_GT(per_token.size(), 1u);
  CliResult raw = run_cli(
      {"embed", "-m", *target_, "-p", "second one", "--pooling", "last", "--embd-normalize", "-1"});
  ASSERT_EQ(raw.exit_code, 0) << raw.err;
  EXPECT_EQ(json::parse(raw.out)[0], per_token.back());

  const std::string text_file = testing::temp_path("embed.txt");
  std::ofstream(text_file) << "first text|second one";
  CliResult doc = run_cli({"embed", "-m", *target_, "-f", text_file, "--embd-separator", "|",
                           "--embd-output-format", "json"});
  ASSERT_EQ(doc.exit_code, 0) << doc.err;
  const json j = json::parse(doc.out);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["data"][1]["embedding"], vectors[1]);
  EXPECT_EQ(j["usage"]["prompt_tokens"], tokens_of(two.err));
  EXPECT_NE(doc.err.find("64 dimensions"), std::string::npos) << doc.err;

  expect_clean_error(run_cli({"embed", "-m", *target_}), "one of -p TEXT and -f FILE");
  expect_clean_error(run_cli({"embed", "-m", *target_, "-p", "x", "--pooling", "rank"}),
                     "--pooling must be none, mean, cls or last");
  expect_clean_error(run_cli({"embed", "-m", *target_, "-p", "x", "--embd-output-format", "csv"}),
                     "--embd-output-format must be array or json");
  expect_clean_error(run_cli({"embed", "-m", *target_, "-p", std::string(200, 'x')}),
                     "more than the model's context of 128");
  expect_clean_error(run_cli({"embed", "-m", *target_, "-p", "\n\n"}), "no text to embed");
}

TEST_F(Cli, VerifyCostTimesTheDraftInEveryLayoutItsFlagsLeadTo) {
  const std::string json = testing::temp_path("verify_cost_draft.json");
  CliResult r = run_cli({"verify-cost", "-m", *target_, "-md", *draft_, "--draft-vocab", "64",
                         "--draft-type", "q8_0", "--prefix", "16", "--k-max", "5", "--repeats", "2",
                         "-t", "1", "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* row : {"| target | 300 | ", "| draft: the file's types, whole head | 300 | ",
                          "| draft: head cut to 64 + the prefix's + control tokens | ",
                          "| draft: --draft-type q8_0, --draft-head-type file, head cut | "}) {
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("--draft-cost "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--draft-verify-cost "), std::string::npos) << r.out;
  // The pass costs of k = 2..5, ready to paste: 4 values, each at least one decode step.
  const size_t at = r.out.find("--draft-pass-costs ");
  ASSERT_NE(at, std::string::npos) << r.out;
  std::istringstream list(r.out.substr(at + 19, r.out.find('\n', at) - at - 19));
  int values = 0;
  for (std::string v; std::getline(list, v, ',');) {
    EXPECT_GE(std::stod(v), 1.0) << v;
    ++values;
  }
  EXPECT_EQ(values, 4) << r.out;
  const std::string j = testing::read_file(json);
  for (const char* key : {"\"draft_steps\"", "\"head_rows_scored\"", "\"target_step_ms\"",
                          "\"verify_row_cost\"", "\"c\""}) {
    EXPECT_NE(j.find(key), std::string::npos) << key << "\n" << j;
  }

  // Without layout flags: the file's layout, the default cut (the tiny head has fewer rows than
  // the default cut, so the cut is the whole head), and the default --draft-type auto's, which
  // `run` uses; with --draft-type file, not that last.
  CliResult plain = run_cli({"verify-cost", "-m", *target_, "-md", *draft_, "--prefix", "16",
                             "--k-max", "1", "--repeats", "1", "-t", "1"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("| draft: --draft-type auto, --draft-head-type file, head cut | "),
            std::string::npos)
      << plain.out;
  // The flags' values as they parse: FILE is file, so no extra row either.
  for (const char* spelling : {"file", "FILE"}) {
    CliResult file = run_cli({"verify-cost", "-m", *target_, "-md", *draft_, "--prefix", "16",
                              "--k-max", "1", "--repeats", "1", "-t", "1", "--draft-type", spelling,
                              "--draft-head-type", spelling});
    ASSERT_EQ(file.exit_code, 0) << file.err;
    EXPECT_EQ(file.out.find("--draft-type"), std::string::npos) << spelling << "\n" << file.out;
  }
  EXPECT_EQ(plain.out.find("--draft-verify-cost"), std::string::npos) << plain.out;  // k = 1 only
  EXPECT_EQ(plain.out.find("--draft-pass-costs"), std::string::npos) << plain.out;

  expect_clean_error(run_cli({"verify-cost", "-m", *target_, "-md", *other_vocab_, "--prefix", "16",
                              "--k-max", "2"}),
                     "vocab");
  expect_clean_error(run_cli({"verify-cost", "-m", *target_, "-md", *draft_, "--draft-type", "q3_k",
                              "--prefix", "16", "--k-max", "2"}),
                     "--draft-type");
}

// --lora: the adapter changes the target's greedy text; speculation with an unadapted draft
// keeps it bit for bit and the sampled distribution (verify); scale 0 is the base model; a
// prompt cache saved without the adapter is another model's; a file that is not an adapter, a
// missing one and a malformed --lora-scaled are one-line errors.
TEST_F(Cli, LoraAdaptsTheTargetAndSpeculationStaysExact) {
  testing::TinyModelSpec spec;
  spec.n_ctx = 128;  // the fixture's target
  const std::string lora =
      testing::write_tiny_lora(spec, testing::TinyLoraSpec{}, testing::temp_path("lora.gguf"));
  const std::vector<std::string> base = {"run", "-m", *target_, "-p", "hello",
                                         "-n",  "24", "--temp", "0",  "--ignore-eos"};
  const auto with = [&base](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  const CliResult plain = with({});
  const CliResult adapted = with({"--lora", lora});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(adapted.exit_code, 0) << adapted.err;
  EXPECT_NE(adapted.out, plain.out);
  const CliResult speculative = with({"--lora", lora, "-md", *draft_, "--draft-max", "3"});
  ASSERT_EQ(speculative.exit_code, 0) << speculative.err;
  EXPECT_EQ(speculative.out, adapted.out);
  EXPECT_EQ(with({"--lora-scaled", lora + ":0"}).out, plain.out);
  EXPECT_EQ(with({"--lora-scaled", lora + ":1"}).out, adapted.out);

  CliResult check =
      run_cli({"verify", "-m", *target_, "-md", *draft_, "--lora", lora, "--samples", "150", "-n",
               "2", "-p", "ab", "-t", "1", "--temp", "0.5", "--top-k", "3"});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("distribution check: PASS"), std::string::npos) << check.out;

  const std::string cache = testing::temp_path("lora-prompt-cache.bin");
  ASSERT_EQ(with({"--prompt-cache", cache}).exit_code, 0);
  expect_clean_error(with({"--lora", lora, "--prompt-cache", cache}), "another model");

  expect_clean_error(with({"--lora", *draft_}), "not a LoRA adapter");
  expect_clean_error(run_cli({"run", "-m", lora, "-p", "x"}), "adapter, not a model");
  expect_clean_error(with({"--lora", testing::temp_path("missing.gguf")}), "missing.gguf");
  expect_clean_error(with({"--lora-scaled", lora}), "is not FILE:SCALE");
  expect_clean_error(with({"--lora-scaled", lora + ":x"}), "--lora-scaled scale");
}

}  // namespace
}  // namespace specdec
