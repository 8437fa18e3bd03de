// `specdec run`: generate from a prompt with llama.cpp-style flags, streaming to stdout; a
// summary (speeds and, with a draft model, the speculative statistics) goes to stderr.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "cli/arg_parser.h"
#include "cli/color_output.h"
#include "cli/commands.h"
#include "cli/engine_setup.h"
#include "cli/memory_report.h"
#include "cli/reasoning_options.h"
#include "cli/stats_report.h"
#include "common/error.h"
#include "engine/engine.h"

namespace specdec::cli {
namespace {

struct RunOptions {
  std::string model, draft_model, prompt, prompt_file, system_prompt, stats_json, suffix;
  std::string prompt_cache;  // llama-cli's --prompt-cache FILE
  bool chat = false, ignore_eos = false, quiet = false, draft_ngram = false;
  bool prompt_cache_all = false, prompt_cache_ro = false;
  std::vector<std::string> stop;
  int32_t n_predict = 128, n_ctx = 4096, threads = 0, draft_max = 0;
  DraftModelOptions drafting;
  KvTypes kv_types;
  DraftKvTypeFlags draft_kv_types;
  float temp = 0.8f, top_p = 0.95f, min_p = 0.05f;
  int32_t top_k = 40;
  FilterOptions filters;  // --typical, --top-nsigma, --xtc-*, --samplers
  LoraOptions lora;       // --lora, --lora-scaled
  PenaltyParams penalties;
  GrammarOptions grammar;
  ReasoningOptions reasoning;  // --reasoning-budget, --reasoning-budget-message
  NgramParams ngram;
  bool ngram_given = false;  // any --ngram-* option
  int64_t seed = -1;
  ColorMode color = ColorMode::Never;
  ChatTemplateOption chat_template;  // --chat-template, --chat-template-file
  DeviceOptions device;              // -ngl, -fa (accepted), --mlock
};

}  // namespace

int run_command(const std::vector<std::string>& args) {
  RunOptions o;
  ArgParser p("specdec run -m MODEL [-md DRAFT | --draft-ngram] -p PROMPT [options]",
              "Generates text from a prompt and streams it to stdout. With -md, a draft model\n"
              "proposes tokens that the target verifies in one pass (lossless speculative\n"
              "decoding): the output distribution is exactly the target's. With --draft-ngram,\n"
              "the proposals are copied from earlier text instead (prompt lookup: no draft\n"
              "model; pays off when the output repeats the prompt). Otherwise it is plain\n"
              "target-only decoding.");
  p.add_string({"-m", "--model"}, "FILE", "target model (GGUF)", o.model);
  add_lora_options(p, o.lora);
  p.add_string({"-md", "--model-draft", "--spec-draft-model"}, "FILE",
               "draft model (GGUF) sharing the target's vocabulary", o.draft_model);
  p.add_flag({"--draft-ngram"},
             "draft by prompt lookup (no draft model): copy what followed the latest earlier "
             "occurrence of the last n tokens (see --ngram-policy)",
             o.draft_ngram);
  add_ngram_options(p, o.ngram, o.ngram_given);
  add_draft_model_options(p, o.drafting);
  add_kv_type_options(p, o.kv_types);
  add_draft_kv_type_options(p, o.draft_kv_types);
  add_draft_max_option(p, o.draft_max,
                       "tokens drafted per round (gamma; with the adaptive policies the most)");
  p.add_string({"-p", "--prompt"}, "TEXT", "prompt", o.prompt);
  p.add_string({"-f", "--file"}, "FILE", "read the prompt from a file", o.prompt_file);
  p.add_flag({"--chat", "-cnv"},
             "format the prompt as a user message with the model's chat template", o.chat);
  p.add_string({"-sys", "--system-prompt"}, "TEXT", "system message for --chat", o.system_prompt);
  add_chat_template_options(p, o.chat_template);
  add_device_options(p, o.device);
  p.add_string({"--suffix"}, "TEXT",
               "fill in the middle: write what goes between the prompt and TEXT, with the "
               "model's FIM tokens (code models)",
               o.suffix);
  p.add_int({"-n", "--n-predict"}, "N",
            "tokens to generate (-1: until end of text or full context)", o.n_predict, -1, 1 << 20);
  p.add_float({"--temp"}, "T", "temperature (0: greedy)", o.temp, 0.0, 100.0);
  p.add_int({"--top-k"}, "K", "keep the K most likely tokens (0: off)", o.top_k, 0, 1 << 24);
  p.add_float({"--top-p"}, "P", "keep the smallest set with probability >= P (1: off)", o.top_p,
              0.0, 1.0);
  p.add_float({"--min-p"}, "P", "drop tokens below P times the top probability (0: off)", o.min_p,
              0.0, 1.0);
  add_filter_options(p, o.filters);
  add_penalty_options(p, o.penalties);
  add_grammar_options(p, o.grammar);
  add_reasoning_options(p, o.reasoning);
  p.add_value({"-s", "--seed"}, "SEED",
              "random seed (default: -1, a random seed, printed in the summary)",
              [&o](const std::string& v) {
                o.seed = parse_int(v, "-s");
                if (o.seed < -1) fail("-s must be >= -1, got ", o.seed);
              });
  p.add_int({"-t", "--threads"}, "N", "threads (default: all cores)", o.threads, 1, 1024);
  p.add_int({"-c", "--ctx-size"}, "N", "context size in tokens (prompt + generation)", o.n_ctx, 8,
            1 << 20);
  p.add_strings({"--stop", "-r", "--reverse-prompt"}, "TEXT",
                "stop when this text is generated (repeatable)", o.stop);
  p.add_flag({"--ignore-eos"}, "keep generating past end-of-text tokens", o.ignore_eos);
  p.add_string({"--stats-json"}, "FILE",
               "write timings and speculative statistics (with a per-round log) as JSON",
               o.stats_json);
  p.add_optional_value({"--color"}, "WHEN",
                       "colour the text by token origin: green accepted drafts (draft model or "
                       "prompt lookup), yellow corrections after a rejection, cyan bonus tokens, "
                       "default colour target-only steps; a legend goes to stderr. WHEN: auto "
                       "(the default of a bare --color: only when stdout is a terminal and "
                       "NO_COLOR is unset), always, never (also without the flag)",
                       [&o](const std::string& v) { o.color = parse_color_mode(v); });
  p.add_string({"--prompt-cache"}, "FILE",
               "reuse the prompt's K/V from FILE when it exists (the part of the prompt it "
               "holds is not read again), and save the prompt's to FILE after the run; the "
               "file must come from the same models and cache types",
               o.prompt_cache);
  p.add_flag({"--prompt-cache-all"}, "with --prompt-cache: save the generated text's K/V too",
             o.prompt_cache_all);
  p.add_flag({"--prompt-cache-ro"}, "with --prompt-cache: read FILE but do not update it",
             o.prompt_cache_ro);
  p.add_flag({"-q", "--quiet"}, "no summary (and no colour legend) on stderr", o.quiet);
  if (!p.parse(args)) {
    std::cout << p.help();
    return 0;
  }
  if (o.model.empty()) fail("-m MODEL is required (see specdec run --help)");
  if (!o.prompt.empty() && !o.prompt_file.empty()) fail("give either -p or -f, not both");
  std::string prompt =
      o.prompt_file.empty() ? o.prompt : read_text_file(o.prompt_file, "prompt file");
  if (prompt.empty()) fail("a prompt is required: -p TEXT or -f FILE");
  if (o.prompt_cache.empty() && (o.prompt_cache_all || o.prompt_cache_ro)) {
    fail("--prompt-cache-all and --prompt-cache-ro need --prompt-cache FILE");
  }
  if (o.prompt_cache_all && o.prompt_cache_ro) {
    fail("--prompt-cache-all saves the file and --prompt-cache-ro does not: give one of them");
  }
  // Checked before any model is loaded, so that a bad combination fails at once.
  if (o.drafting.spec_type.given && o.draft_ngram) {
    fail("--spec-type and --draft-ngram both choose the drafter: give one of them");
  }
  if (apply_spec_type(o.drafting.spec_type, o.drafting, o.draft_model, std::cerr)) {
    o.draft_ngram = true;
  }
  if (o.draft_ngram && !o.draft_model.empty()) {
    fail("--draft-ngram and -md are mutually exclusive: draft with a model or by prompt lookup");
  }
  check_draft_model_options(o.drafting);  // bad --draft-*type values fail before any model loads
  const bool hybrid = check_hybrid_option(o.drafting.hybrid, !o.draft_model.empty());
  o.draft_kv_types.check(!o.draft_model.empty());
  check_ngram_options(o.ngram, o.ngram_given, o.draft_ngram || hybrid);
  const std::shared_ptr<const Grammar> grammar = load_grammar(o.grammar);

  const auto load_start = std::chrono::steady_clock::now();
  LoadedModel target = LoadedModel::load(o.model, ModelLoadOptions{}, file_access(o.device));
  apply_lora_options(o.lora, target);
  apply_chat_template_option(o.chat_template, target);
  std::unique_ptr<LoadedModel> draft = load_draft(o.draft_model, o.drafting, file_access(o.device));
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start)
          .count();

  EngineOptions eo;
  eo.n_ctx = o.n_ctx;
  eo.kv_types = o.kv_types;
  eo.draft_kv_types = o.draft_kv_types.resolve(o.kv_types);
  eo.n_threads = thread_count(o.threads);
  eo.draft_vocab = o.drafting.vocab;
  Engine engine(target, draft.get(), eo);
  apply_device_options(o.device, std::cerr);
  note_reasoning_options(o.reasoning, engine.chat_template(), std::cerr);

  if (o.chat && !o.suffix.empty()) fail("--suffix and --chat are mutually exclusive");
  if (o.chat) {
    std::vector<ChatMessage> msgs;
    if (!o.system_prompt.empty()) msgs.push_back({"system", o.system_prompt});
    msgs.push_back({"user", prompt});
    prompt = engine.chat_template().apply(msgs, /*add_generation_prompt=*/true, /*tools=*/{},
                                          thinking_enabled(o.reasoning));
  } else if (!o.system_prompt.empty()) {
    fail("-sys needs --chat");
  }
  std::vector<int32_t> tokens = o.suffix.empty()
                                    ? engine.tokenize_prompt(prompt)
                                    : encode_fim_prompt(engine.tokenizer(), prompt, o.suffix);

  GenerationOptions go;
  go.max_tokens = o.n_predict;
  go.sampling.temperature = o.temp;
  go.sampling.top_k = o.top_k;
  go.sampling.top_p = o.top_p;
  go.sampling.min_p = o.min_p;
  go.penalties = o.penalties;
  take_filters(o.filters, go.sampling, go.penalties);
  go.sampling.seed = o.seed >= 0 ? static_cast<uint64_t>(o.seed) : std::random_device{}();
  go.grammar = grammar;
  apply_reasoning_options(o.reasoning, go);
  go.stop = o.stop;
  go.ignore_eos = o.ignore_eos;
  go.draft_max = draft_max_for(o.draft_max, go.sampling.greedy(), !o.draft_ngram);
  go.draft_length = o.drafting.length;
  go.draft_context = o.drafting.context;
  go.hybrid = hybrid;
  if (hybrid) go.ngram = o.ngram;
  if (o.draft_ngram) {
    go.drafter = DrafterKind::Ngram;
    go.ngram = o.ngram;
  }

  // The cache file's text and K/V go into the engine's slot; the run below reuses as much of
  // it as its prompt shares (GenerationStats::cached_tokens).
  if (!o.prompt_cache.empty() && std::filesystem::exists(o.prompt_cache)) {
    const auto restore_start = std::chrono::steady_clock::now();
    const Engine::SlotFileStats restored = engine.restore_slot(0, o.prompt_cache);
    const double restore_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - restore_start)
            .count();
    if (!o.quiet) {
      const size_t common = shared_prefix(engine.slot_history(0), tokens);
      std::cerr << "prompt cache: " << o.prompt_cache << " holds " << restored.tokens
                << " tokens (the draft's K/V for " << restored.draft_tokens << "), " << common
                << " of them this prompt's start; read in " << std::fixed << std::setprecision(1)
                << restore_ms << " ms\n";
    }
  }

  GenerationResult result;
  if (color_enabled(o.color)) {
    if (!o.quiet) std::cerr << color_legend();
    ColorWriter painter(std::cout);
    result =
        engine.generate_pieces(tokens, go, [&painter](std::string_view text, TokenOrigin origin) {
          painter.write(text, origin);
          std::cout << std::flush;
          return true;
        });
    painter.finish();
  } else {
    result = engine.generate(tokens, go, [](std::string_view text) {
      std::cout << text << std::flush;
      return true;
    });
  }
  std::cout << std::endl;

  if (!o.prompt_cache.empty() && !o.prompt_cache_ro) {
    const Engine::SlotFileStats saved = engine.save_slot(
        0, o.prompt_cache, o.prompt_cache_all ? -1 : static_cast<int32_t>(tokens.size()));
    if (!o.quiet) {
      std::cerr << "prompt cache: saved " << saved.tokens << " tokens (the draft's K/V for "
                << saved.draft_tokens << ") to " << o.prompt_cache << " (" << saved.bytes / 1024
                << " KiB)\n";
    }
  }

  if (!o.quiet) {
    std::cerr << format_summary(result, load_ms, go.sampling.seed, eo.n_threads);
    std::cerr << format_memory(target, draft.get(), eo.n_ctx, read_process_memory(), eo.kv_types,
                               eo.draft_kv_types);
  }
  if (!o.stats_json.empty()) {
    std::ofstream out(o.stats_json);
    if (!out) fail("cannot write --stats-json file '", o.stats_json, "'");
    nlohmann::json j = stats_to_json(result, go, eo.n_threads);
    // The token ids let drafting policies be replayed offline: at T = 0 the committed text does
    // not depend on the drafter, so any prompt-lookup policy can be simulated on it exactly.
    j["prompt_token_ids"] = tokens;
    j["token_ids"] = result.tokens;
    j["memory"] = memory_to_json(target, draft.get(), eo.n_ctx, read_process_memory(), eo.kv_types,
                                 eo.draft_kv_types);
    out << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace specdec::cli
