// `specdec chat`: an interactive terminal chat. Each turn renders the whole conversation with
// the model's chat template and generates the reply, streaming it; the engine's prompt-prefix
// cache makes that cheap, since only the new user message (and the previous reply as the
// template spells it) is new to the KV cache. Lines come from stdin, so it also works piped.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <iomanip>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/engine_setup.h"
#include "cli/reasoning_options.h"
#include "common/error.h"
#include "engine/engine.h"

namespace specdec::cli {

namespace {

// Ctrl-C while a reply is being generated stops that reply, not the program.
std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }

std::string format_turn_stats(const GenerationResult& r) {
  const GenerationStats& s = r.stats;
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  const double tps = s.decode_ms > 0 ? s.generated_tokens * 1000.0 / s.decode_ms : 0.0;
  out << "last turn: " << s.prompt_tokens << " prompt tokens, " << s.generated_tokens
      << " generated, " << tps << " tokens/s decode, finish " << finish_reason_name(r.finish)
      << "\n";
  if (s.speculative) {
    out << "speculative: gamma " << s.draft_max << ", " << s.spec.rounds << " rounds, "
        << s.spec.drafted << " drafted, " << s.spec.accepted << " accepted (acceptance "
        << 100.0 * s.spec.acceptance_rate() << " %), " << std::setprecision(2)
        << s.spec.tokens_per_target_call() << " tokens per target call\n";
  } else {
    out << "speculative: off (target only)\n";
  }
  return out.str();
}

}  // namespace

int chat_command(const std::vector<std::string>& args) {
  std::string model, draft_model, system_prompt;
  int32_t n_predict = -1, n_ctx = 4096, threads = 0, draft_max = 0, top_k = 40;
  float temp = 0.8f, top_p = 0.95f, min_p = 0.05f;
  int64_t seed = -1;
  PenaltyParams penalties;
  FilterOptions filters;  // --typical, --top-nsigma, --xtc-*, --samplers
  LoraOptions lora;       // --lora, --lora-scaled
  ArgParser p("specdec chat -m MODEL [-md DRAFT] [options]",
              "Interactive chat in the terminal with the model's chat template. Type a message\n"
              "and press Enter; the reply streams as it is generated. Commands: /reset (forget\n"
              "the conversation), /stats (the last turn's speculative statistics), /exit.\n"
              "End of input (Ctrl-D, or the end of a pipe) also ends the chat.");
  p.add_string({"-m", "--model"}, "FILE", "target model (GGUF)", model);
  add_lora_options(p, lora);
  ChatTemplateOption chat_template;
  add_chat_template_options(p, chat_template);
  DeviceOptions device;
  add_device_options(p, device);
  p.add_string({"-md", "--model-draft", "--spec-draft-model"}, "FILE",
               "draft model (GGUF) sharing the target's vocabulary", draft_model);
  add_draft_max_option(p, draft_max,
                       "tokens drafted per round (gamma; with the adaptive policy the most)");
  DraftModelOptions drafting;
  KvTypes kv_types;
  DraftKvTypeFlags draft_kv_types;
  add_draft_model_options(p, drafting);
  add_kv_type_options(p, kv_types);
  add_draft_kv_type_options(p, draft_kv_types);
  p.add_string({"-sys", "--system-prompt"}, "TEXT", "system message", system_prompt);
  p.add_int({"-n", "--n-predict"}, "N", "most tokens per reply (-1: until the turn ends)",
            n_predict, -1, 1 << 20);
  p.add_float({"--temp"}, "T", "temperature (0: greedy)", temp, 0.0, 100.0);
  p.add_int({"--top-k"}, "K", "keep the K most likely tokens (0: off)", top_k, 0, 1 << 24);
  p.add_float({"--top-p"}, "P", "keep the smallest set with probability >= P (1: off)", top_p, 0.0,
              1.0);
  p.add_float({"--min-p"}, "P", "drop tokens below P times the top probability (0: off)", min_p,
              0.0, 1.0);
  add_filter_options(p, filters);
  add_penalty_options(p, penalties);
  ReasoningOptions reasoning;
  add_reasoning_options(p, reasoning);
  p.add_value({"-s", "--seed"}, "SEED", "random seed (default: -1, random)",
              [&seed](const std::string& v) {
                seed = parse_int(v, "-s");
                if (seed < -1) fail("-s must be >= -1, got ", seed);
              });
  p.add_int({"-t", "--threads"}, "N", "threads (default: all cores)", threads, 1, 1024);
  p.add_int({"-c", "--ctx-size"}, "N", "context size in tokens (the whole conversation)", n_ctx, 8,
            1 << 20);
  if (!p.parse(args)) {
    std::cout << p.help();
    return 0;
  }
  if (model.empty()) fail("-m MODEL is required (see specdec chat --help)");
  check_draft_model_options(drafting);  // bad --draft-*type values fail before any model loads
  // --spec-type ngram-* alone: replies draft by prompt lookup (earlier turns are the prompt).
  const bool lookup_only = apply_spec_type(drafting.spec_type, drafting, draft_model, std::cerr);
  const bool hybrid = check_hybrid_option(drafting.hybrid, !draft_model.empty());
  draft_kv_types.check(!draft_model.empty());

  LoadedModel target = LoadedModel::load(model, ModelLoadOptions{}, file_access(device));
  apply_lora_options(lora, target);
  apply_chat_template_option(chat_template, target);
  std::unique_ptr<LoadedModel> draft = load_draft(draft_model, drafting, file_access(device));
  EngineOptions eo;
  eo.n_ctx = n_ctx;
  eo.kv_types = kv_types;
  eo.draft_kv_types = draft_kv_types.resolve(kv_types);
  eo.n_threads = thread_count(threads);
  eo.draft_vocab = drafting.vocab;
  Engine engine(target, draft.get(), eo);
  apply_device_options(device, std::cerr);
  note_reasoning_options(reasoning, engine.chat_template(), std::cerr);

  const bool interactive = isatty(STDIN_FILENO) != 0;
  if (interactive) {
    std::cerr << "specdec chat: " << engine.chat_template().name() << " template"
              << (draft         ? ", speculative with draft '" + draft_model + "'"
                  : lookup_only ? ", speculative by prompt lookup"
                                : std::string())
              << ". /reset, /stats, /exit; Ctrl-C stops a reply.\n";
  }
  std::vector<ChatMessage> history;
  if (!system_prompt.empty()) history.push_back({"system", system_prompt});
  const size_t base_size = history.size();
  std::optional<GenerationResult> last;
  std::mt19937_64 seeds(seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}());

  std::string line;
  for (;;) {
    if (interactive) std::cout << "> " << std::flush;
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      history.resize(base_size);
      last.reset();
      std::cout << "[conversation reset]" << std::endl;
      continue;
    }
    if (line == "/stats") {
      std::cout << (last ? format_turn_stats(*last) : std::string("no turn yet\n")) << std::flush;
      continue;
    }
    history.push_back({"user", line});
    const std::vector<int32_t> prompt = engine.tokenize_prompt(
        engine.chat_template().apply(history, true, /*tools=*/{}, thinking_enabled(reasoning)));
    if (static_cast<int32_t>(prompt.size()) >= n_ctx - 1) {
      history.pop_back();
      std::cout << "[the conversation (" << prompt.size() << " tokens) no longer fits the context ("
                << n_ctx << "); /reset to start over]" << std::endl;
      continue;
    }
    GenerationOptions go;
    go.max_tokens = n_predict;
    go.sampling.temperature = temp;
    go.sampling.top_k = top_k;
    go.sampling.top_p = top_p;
    go.sampling.min_p = min_p;
    go.penalties = penalties;
    take_filters(filters, go.sampling, go.penalties);
    go.sampling.seed = seeds();  // a fresh stream per turn, reproducible from -s
    go.draft_max = draft_max_for(draft_max, go.sampling.greedy(), !lookup_only);
    if (lookup_only) go.drafter = DrafterKind::Ngram;
    go.draft_length = drafting.length;
    go.draft_context = drafting.context;
    go.hybrid = hybrid;
    apply_reasoning_options(reasoning, go);

    g_interrupted = false;
    auto previous = std::signal(SIGINT, on_sigint);
    GenerationResult result = engine.generate(prompt, go, [](std::string_view text) {
      std::cout << text << std::flush;
      return !g_interrupted.load();
    });
    std::signal(SIGINT, previous);
    std::cout << std::endl;
    if (result.finish == FinishReason::Cancelled) std::cout << "[interrupted]" << std::endl;
    history.push_back({"assistant", result.text});
    last = std::move(result);
  }
  return 0;
}

}  // namespace specdec::cli
