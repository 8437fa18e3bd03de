// `specdec verify -m TARGET -md DRAFT`: the lossless self-check (see engine/self_check.h).
#include <iomanip>
#include <iostream>
#include <thread>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/engine_setup.h"
#include "cli/progress.h"
#include "common/error.h"
#include "engine/self_check.h"

namespace specdec::cli {

int verify_command(const std::vector<std::string>& args) {
  std::string model, draft_model;
  std::vector<std::string> prompts;
  int32_t samples = 200, tokens = 2, draft_max = 4, threads = 0, n_ctx = 512, top_k = 40;
  float temp = 1.0f, top_p = 0.95f, min_p = 0.0f;
  uint64_t seed = 1;
  PenaltyParams penalties;
  FilterOptions filters;  // --typical, --top-nsigma, --xtc-*, --samplers
  LoraOptions lora;       // --lora, --lora-scaled
  ArgParser p("specdec verify -m TARGET -md DRAFT [options]",
              "Checks on your own models that speculative decoding is lossless: samples many\n"
              "short continuations of the same prompts with and without speculation, reports\n"
              "the total-variation distance and a chi-square p-value between the two output\n"
              "distributions, and compares the measured acceptance rate with the analytic\n"
              "sum_x min(p, q). Exits 0 when both checks pass, 1 otherwise.");
  p.add_string({"-m", "--model"}, "FILE", "target model (GGUF)", model);
  add_lora_options(p, lora);
  p.add_string({"-md", "--model-draft", "--spec-draft-model"}, "FILE", "draft model (GGUF)",
               draft_model);
  p.add_strings({"-p", "--prompt"}, "TEXT", "prompt (repeatable; default: three built-in prompts)",
                prompts);
  p.add_int({"--samples"}, "N", "continuations per prompt and mode", samples, 2, 1000000);
  p.add_int({"-n", "--n-predict"}, "N", "tokens per continuation", tokens, 1, 64);
  p.add_int({"--draft-max", "--draft"}, "N", "tokens drafted per round (gamma)", draft_max, 1, 64);
  DraftModelOptions drafting;
  KvTypes kv_types;
  DraftKvTypeFlags draft_kv_types;
  add_draft_model_options(p, drafting);
  add_kv_type_options(p, kv_types);
  add_draft_kv_type_options(p, draft_kv_types);
  p.add_float({"--temp"}, "T", "temperature (> 0: the check is about sampling)", temp, 0.01, 100.0);
  p.add_int({"--top-k"}, "K", "top-k filter (0: off)", top_k, 0, 1 << 24);
  p.add_float({"--top-p"}, "P", "top-p filter (1: off)", top_p, 0.0, 1.0);
  p.add_float({"--min-p"}, "P", "min-p filter (0: off)", min_p, 0.0, 1.0);
  add_filter_options(p, filters);
  add_penalty_options(p, penalties);
  p.add_u64({"-s", "--seed"}, "SEED", "first seed of the run", seed);
  p.add_int({"-t", "--threads"}, "N", "threads (default: all cores)", threads, 1, 1024);
  p.add_int({"-c", "--ctx-size"}, "N", "context size", n_ctx, 8, 1 << 20);
  if (!p.parse(args)) {
    std::cout << p.help();
    return 0;
  }
  if (model.empty() || draft_model.empty()) fail("verify needs -m TARGET and -md DRAFT");
  if (prompts.empty()) {
    prompts = {"The capital of France is", "Once upon a time", "def add(a, b):"};
  }
  check_draft_model_options(drafting);
  LoadedModel target = LoadedModel::load(model);
  apply_lora_options(lora, target);
  std::unique_ptr<LoadedModel> draft = load_draft(draft_model, drafting);
  EngineOptions eo;
  eo.n_ctx = n_ctx;
  eo.kv_types = kv_types;
  eo.draft_kv_types = draft_kv_types.resolve(kv_types);
  eo.n_threads = thread_count(threads);
  eo.draft_vocab = drafting.vocab;
  Engine engine(target, draft.get(), eo);

  SelfCheckOptions o;
  o.prompts = prompts;
  o.samples = samples;
  o.tokens = tokens;
  o.generation.sampling = {temp, top_k, top_p, min_p, seed};
  o.generation.penalties = penalties;
  take_filters(filters, o.generation.sampling, o.generation.penalties);
  o.generation.draft_max = draft_max;
  o.generation.draft_length = drafting.length;
  o.generation.draft_context = drafting.context;
  o.generation.hybrid = check_hybrid_option(drafting.hybrid, true);
  o.generation.ignore_eos = true;
  ProgressBar bar("sampling");
  SelfCheckReport r =
      run_self_check(engine, o, [&bar](int64_t done, int64_t total) { bar.update(done, total); });
  bar.finish();

  std::cout << std::fixed << std::setprecision(4);
  // What the sampling flags and a --samplers sequence left on.
  const SamplingParams& sp = o.generation.sampling;
  std::cout << "continuations: " << samples << " per prompt and mode, " << tokens
            << " tokens each, gamma " << draft_max << ", T " << sp.temperature << ", top-k "
            << sp.top_k << ", top-p " << sp.top_p << ", min-p " << sp.min_p;
  if (sp.temperature_last) std::cout << " (temperature last)";
  if (sp.typical_p < 1.0f) std::cout << ", typical " << sp.typical_p;
  if (sp.top_n_sigma > 0.0f) std::cout << ", top-n-sigma " << sp.top_n_sigma;
  if (sp.dynatemp_range > 0.0f) {
    std::cout << ", dynamic temperature +-" << sp.dynatemp_range << " (exponent "
              << sp.dynatemp_exponent << ")";
  }
  if (sp.xtc_active()) {
    std::cout << ", XTC " << sp.xtc_probability << " above " << sp.xtc_threshold;
  }
  if (sp.mirostat != 0) {
    std::cout << ", Mirostat " << sp.mirostat << " (tau " << sp.mirostat_tau << ", eta "
              << sp.mirostat_eta << "; replaces the filters)";
  }
  const PenaltyParams& pen = o.generation.penalties;
  if (pen.active()) {
    std::cout << ", repeat penalty " << pen.repetition_penalty << ", presence penalty "
              << pen.presence_penalty << ", frequency penalty " << pen.frequency_penalty << ", "
              << pen.logit_bias.size() << " logit biases";
    if (pen.last_n >= 0) {
      std::cout << " (penalties over the last ";
      if (pen.last_n == PenaltyParams::kWholeText) {
        std::cout << "all";
      } else {
        std::cout << pen.last_n;
      }
      std::cout << " tokens of prompt and text)";
    }
    if (pen.dry.active()) {
      std::cout << ", DRY " << pen.dry.multiplier << " x " << pen.dry.base << "^(run - "
                << pen.dry.allowed_length << ")";
    }
  }
  std::cout << "\n\n";
  std::cout << "prompt                              distinct   TV      TV(noise)  chi2     dof  "
               "p-value\n";
  for (const PromptCheck& c : r.prompts) {
    std::string shown = c.prompt.substr(0, 34);
    for (char& ch : shown) {
      if (ch == '\n' || ch == '\t') ch = ' ';
    }
    std::cout << std::left << std::setw(36) << shown << std::right << std::setw(8) << c.distinct
              << "  " << c.tv << "  " << c.tv_null << "     " << std::setw(8)
              << std::setprecision(2) << c.chi.stat << " " << std::setw(4) << c.chi.dof << "  "
              << std::setprecision(4) << c.chi.p_value << "\n";
  }
  std::cout << "\nacceptance: " << r.accepted << " of " << r.tested << " tested drafts ("
            << 100.0 * r.measured_acceptance << "%) vs analytic sum min(p,q) "
            << 100.0 * r.analytic_acceptance << "% (z = " << std::setprecision(2) << r.acceptance_z
            << "); " << std::setprecision(4) << 100.0 * r.acceptance_rate << "% of all "
            << r.drafted << " drafted\n";
  std::cout << "distribution check: " << (r.distribution_ok ? "PASS" : "FAIL")
            << " (family-wise alpha 0.001)\n";
  std::cout << "acceptance check:   " << (r.acceptance_ok ? "PASS" : "FAIL") << " (|z| < 4)\n";
  return r.passed() ? 0 : 1;
}

}  // namespace specdec::cli
