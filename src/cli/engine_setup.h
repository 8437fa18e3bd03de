// What every model-running command does the same way: how -t and -md are resolved, and the
// prompt-lookup (--draft-ngram) options.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/arg_parser.h"
#include "engine/loaded_model.h"
#include "grammar/grammar.h"
#include "sampling/distribution.h"
#include "speculative/drafter.h"
#include "speculative/ngram_drafter.h"

namespace specdec::cli {

// The -t value, or every core of the machine when it was not given (0).
int thread_count(int32_t requested);

// A whole file's bytes; `what` names it in the error ("prompt file").
std::string read_text_file(const std::string& path, const char* what);

// `serve --parallel`: sequences generated at once. Four slots of the Qwen pair at 4,096 tokens
// of context hold about 1.3 GiB of KV cache.
inline constexpr int32_t kDefaultParallel = 4;

// The most tokens a draft model proposes per round (gamma) unless --draft-max says otherwise.
// With the adaptive length rule (the default) this is a cap: on the Qwen2.5-Coder pair, 2
// threads, a cap of 8 with the adaptive rule and hybrid lookup beat a fixed gamma of 5 by 1.33x
// vs 1.12x over target-only at T = 0 and tied it (1.14-1.16x) at T = 0.7 (docs/benchmarks.md).
// Greedy requests with a draft model stop at 4: in two runs of 12 prompts (summaries, code,
// opinions; 200 tokens) a cap of 4 gave 1.42x where 8 gave 1.33x, while at T = 0.7 the cap of
// 8 stayed ahead (1.28x against 1.24x). A verify pass over more than 5 rows is compute bound
// here (the pass-cost line jumps after k = 5), which the adaptive rule's flat row cost does
// not see, and greedy rounds, whose drafts look surest, ran into it most. Rechecked after the
// 16-row K-quant kernels made wide passes cheaper (12 prompts, 128 tokens): T = 0, cap 4
// 1.59x vs cap 8 1.48x; T = 0.7, cap 4 ahead at 128 tokens (1.49x vs 1.39x), mixed at 200
// (1.45x vs 1.40x overall, cap 8 ahead on summaries and opinions), so sampling keeps 8.
inline constexpr int32_t kDefaultDraftMax = 8;
inline constexpr int32_t kDefaultGreedyDraftMax = 4;
// --draft-max N (alias --draft): draft_max stays 0 unless given (then 1..64).
void add_draft_max_option(ArgParser& p, int32_t& draft_max, const std::string& help);
// gamma for a generation: the given --draft-max, else the default for its temperature and
// drafter (prompt lookup alone keeps kDefaultDraftMax: nothing was measured for it).
int32_t draft_max_for(int32_t given, bool greedy, bool model_draft);

// --draft-vocab N: the draft model's head is laid out in frequency order at load and each
// generation scores its N most frequent tokens plus the prompt's own tokens and the control
// tokens (FR-Spec, engine/draft_vocab.h); 0 scores the whole vocabulary. Lossless either way.
// On the Qwen2.5-Coder pair, 2 threads, 128 tokens, the defaults otherwise (docs/benchmarks.md):
// 32,768 cut the draft cost c from 0.38-0.41 to 0.27-0.30 target steps and took summaries
// from 1.15x to 1.23x (T 0) and code from 1.44x to 1.72x, for 0-6 points of acceptance.
inline constexpr int32_t kDefaultDraftVocab = 32768;
// --draft-context N: the draft reads at most the last N tokens of a text it has not read
// (GenerationOptions::draft_context). Measured on the Qwen pair (docs/benchmarks.md).
inline constexpr int32_t kDefaultDraftContext = 256;
void add_draft_vocab_option(ArgParser& p, int32_t& draft_vocab);

// -ctk/--cache-type-k and -ctv/--cache-type-v f32|f16|q8_0 (llama.cpp's flags): how the KV
// caches (the target's, and the draft's unless -ctkd/-ctvd say otherwise) store K and V. f32 by
// default; f16 halves the cache and attention's reads per token; q8_0 takes 17/64 of f32 and scores
// keys in integer arithmetic, so long contexts decode faster and fit in less memory; the text may
// differ from f32's in the last bits, as llama.cpp's does from an f32 cache.
void add_kv_type_options(ArgParser& p, KvTypes& types);

// -ctkd/--cache-type-k-draft and -ctvd/--cache-type-v-draft (llama.cpp's flags): the draft's
// cache types; a part not given follows the target's. Any type keeps the output exact (it only
// changes the draft's q), so a draft can take q8_0 while the target keeps f32.
struct DraftKvTypeFlags {
  std::optional<KvType> k, v;
  // EngineOptions::draft_kv_types: nullopt when neither flag was given.
  std::optional<KvTypes> resolve(KvTypes target) const;
  // Fails (one line) when a flag was given but there is no draft model for it to apply to.
  void check(bool has_draft_model) const;
};
void add_draft_kv_type_options(ArgParser& p, DraftKvTypeFlags& types);

// --draft-policy fixed|adaptive, --draft-cost C, --draft-verify-cost V: how many tokens a draft
// model proposes per round (speculative/drafter.h, DraftLengthParams); --draft-max is the cap.
// Defaults: measured on the Qwen2.5-Coder pair (docs/benchmarks.md).
DraftLengthParams default_draft_length();
void add_draft_length_options(ArgParser& p, DraftLengthParams& params);
// "fixed", "adaptive" or "confidence": the --draft-policy value these parameters stand for.
const char* draft_policy_name(const DraftLengthParams& params);

// --draft-hybrid / --no-draft-hybrid: with -md, a round takes prompt lookup's drafts (the
// --ngram-* settings) when the lookup proposes at least 2 tokens, the model's otherwise
// (speculative/hybrid_drafter.h). kDefaultDraftHybrid is the measured default.
inline constexpr bool kDefaultDraftHybrid = true;
// --repeat-penalty, --presence-penalty, --frequency-penalty, --repeat-last-n and -l/--logit-bias
// TOKEN(+|-)BIAS (llama.cpp's names; sampling/penalties.h has what each does). Ranges are checked
// at parse time, token ids against the vocabulary when the engine runs.
void add_penalty_options(ArgParser& p, PenaltyParams& penalties);
// The flags' own parsers, shared with serve's request defaults (cli/request_default_options.h):
// -l TOKEN(+|-)BIAS; a --dry-sequence-breaker typed on a command line (\n, \t, \" and \\ stand
// for a newline, a tab, a quote and a backslash: a newline is hard to type as an argument);
// --samplers "top_k;top_p;..." and --sampling-seq LETTERS as canonical names (an unknown name or
// letter fails, naming the flag).
std::pair<int32_t, float> parse_logit_bias_flag(const std::string& v);
std::string unescape_breaker(const std::string& v);
std::vector<std::string> parse_samplers_flag(const std::string& v);
std::vector<std::string> parse_sampling_seq_flag(const std::string& v);

// The chat template in place of the target file's, with llama.cpp's flags: --chat-template
// NAME|JINJA (chatml, llama3, llama2, gemma, zephyr, phi3, or a Jinja template of one of those
// families) and --chat-template-file FILE; checked as they are parsed, so a template specdec
// does not render fails before any model loads. --jinja is accepted for llama-server's command
// lines (templates are always rendered with their tool calling).
struct ChatTemplateOption {
  std::string text;  // empty: the file's template
};
void add_chat_template_options(ArgParser& p, ChatTemplateOption& option);
// Sets the template on the loaded target; nothing without one.
void apply_chat_template_option(const ChatTemplateOption& option, LoadedModel& target);

// llama.cpp's device flags, so that its command lines run here: -ngl/--n-gpu-layers N and
// -fa/--flash-attn on|off|auto are accepted and change nothing (specdec runs every layer on the
// CPU, with its own attention kernels; a note on stderr says so), and --mlock locks the process's
// memory (the weights and their packed copies) so that they are never paged out.
// The draft's and the batch's device and thread flags (-ngld, -devd, -dev, -td, -tbd, -tb and
// their --spec-draft-* spellings) are accepted the same way: specdec has one device, the CPU,
// and one thread pool (-t), on which the draft runs between the target's passes.
struct DeviceOptions {
  std::string gpu_layers;  // as given ("" when not)
  std::string flash_attn;
  bool mlock = false;
  bool no_mmap = false;            // --no-mmap: read the model files whole instead of mapping them
  std::vector<std::string> notes;  // what the accepted flags given do not change, for stderr
};
void add_device_options(ArgParser& p, DeviceOptions& options);
// After the models are loaded and the engine built: the notes, and --mlock's mlockall(MCL_CURRENT)
// (what is mapped then: the weights, their packed copies, the KV caches; not MCL_FUTURE, under
// which any later allocation past the memlock limit would fail). A lock the system refuses
// (RLIMIT_MEMLOCK; `ulimit -l`) is a warning, not an error, as in llama.cpp.
void apply_device_options(const DeviceOptions& options, std::ostream& log);

// LoRA adapters for the target, with llama.cpp's flags: --lora FILE[,FILE...] (scale 1) and
// --lora-scaled FILE:SCALE[,...], both repeatable, applied in the order given.
struct LoraOptions {
  std::vector<std::pair<std::string, float>> adapters;  // path, scale
};
void add_lora_options(ArgParser& p, LoraOptions& lora);
// Reads the adapters for the loaded target (model/lora.h) and sets them on its model; nothing
// without any. Throws specdec::Error naming the file for an adapter that does not fit.
void apply_lora_options(const LoraOptions& lora, LoadedModel& target);

// The values of the sampling flags add_filter_options parses, and llama.cpp's sampler sequence
// (--samplers / --sampling-seq; none given: the engine's order, the temperature first).
struct FilterOptions : SamplingParams {
  std::optional<std::vector<std::string>> sequence;  // canonical names (sampler_sequence.h)
};

// llama.cpp's further filters, --typical, --top-nsigma, --xtc-probability, --xtc-threshold,
// --dynatemp-range and --dynatemp-exp, Mirostat's --mirostat, --mirostat-ent and --mirostat-lr,
// parsed into those fields of `filters` (each range-checked as it is parsed; the other fields are
// left alone), and llama.cpp's --samplers "top_k;top_p;min_p;temperature" and --sampling-seq
// kpmt. take_filters copies them into a request's sampling settings and then applies the
// sequence, if one was given, to those settings and the request's penalties: the stages it
// leaves out are switched off and the temperature stands where it puts it (an order the engine
// does not apply fails, naming the flag).
void add_filter_options(ArgParser& p, FilterOptions& filters);
void take_filters(const FilterOptions& filters, SamplingParams& sampling, PenaltyParams& penalties);

// Structured output, with llama.cpp's flags: --grammar GBNF, --grammar-file FILE, -j/--json-schema
// SCHEMA, -jf/--json-schema-file FILE; and --regex PATTERN, as vLLM's guided_regex (at most one
// of them).
struct GrammarOptions {
  std::string grammar, grammar_file, json_schema, json_schema_file, regex;
};
void add_grammar_options(ArgParser& p, GrammarOptions& options);
// The compiled grammar (null: none given). Throws specdec::Error naming the flag on a bad
// grammar or schema, before any model is loaded.
std::shared_ptr<const Grammar> load_grammar(const GrammarOptions& options);

struct HybridOption {
  bool on = kDefaultDraftHybrid;
  bool given = false;  // --draft-hybrid or --no-draft-hybrid was on the command line
};
void add_hybrid_option(ArgParser& p, HybridOption& hybrid);
// After parsing: an explicit --draft-hybrid needs a draft model; the default just does not apply
// without one. Returns whether hybrid drafting is on.
bool check_hybrid_option(const HybridOption& hybrid, bool has_draft_model);

// --draft-type TYPE / --draft-head-type TYPE: the block format the draft's block matrices / its
// output head are requantized into at load (model/weight_packing.h), or "file" to keep the
// file's. A draft step streams every matrix, so fewer bytes per weight make it cheaper;
// lossless either way (docs/benchmarks.md has what each costs in acceptance). "auto" (blocks
// only, the default): kAutoDraftType for the matrices the file stores in more bytes per weight,
// the file's type for the others. On the Qwen2.5-Coder pair (0.5B blocks Q5_0, Q6_K and Q4_K)
// that cut the draft's cost c from 0.27-0.29 to 0.23-0.25 of a target step for 3 points of
// acceptance on code at T 0 and none elsewhere: 3-12 % faster on summaries and code
// (docs/benchmarks.md, 2026-12-07).
inline constexpr std::string_view kDefaultDraftType = "auto";
inline constexpr std::string_view kDefaultDraftHeadType = "file";
inline constexpr GgmlType kAutoDraftType = GgmlType::Q4_0;
// The type named by a --draft-type / --draft-head-type value (flag; case-insensitive: q4_0,
// Q4_K, ...; "auto" for --draft-type only: kAutoDraftType, which load_draft applies only where
// it is smaller), nullopt for "file"; throws specdec::Error for anything else or a type the
// packed kernels do not read.
std::optional<GgmlType> parse_draft_type(const std::string& flag, const std::string& name);

// How a draft model drafts: --draft-vocab, --draft-type, --draft-policy/--draft-cost/
// --draft-verify-cost and --draft-hybrid, the same flags on every command that takes -md.
// llama.cpp's --spec-type LIST (recent llama-server speculates only when it is given): which
// drafters run. none: no speculation. draft-simple: the -md draft model. ngram-simple,
// ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache: prompt lookup, all served by specdec's
// own lookup (speculative/ngram_drafter.h), whose drafts are exact like any other. Types that
// need draft heads inside the target (draft-mtp, draft-eagle3, ...) are refused by name.
struct SpecType {
  bool given = false;
  bool none = false;
  bool model = false;   // draft-simple
  bool lookup = false;  // any ngram-* type
};
SpecType parse_spec_type(const std::string& list);  // throws specdec::Error, naming the type
void add_spec_type_option(ArgParser& p, SpecType& type);

struct DraftModelOptions {
  int32_t vocab = kDefaultDraftVocab;
  std::string type{kDefaultDraftType};
  std::string head_type{kDefaultDraftHeadType};
  DraftLengthParams length = default_draft_length();
  HybridOption hybrid;
  int32_t context = kDefaultDraftContext;  // --draft-context
  SpecType spec_type;                      // --spec-type
};
void add_draft_model_options(ArgParser& p, DraftModelOptions& options);
// Only the flags that choose how the draft's weights are laid out and scored (--draft-vocab,
// --draft-type, --draft-head-type), for commands that time a draft without generating.
void add_draft_layout_options(ArgParser& p, DraftModelOptions& options);

// After parsing, before anything loads: what --spec-type asks of the command's drafting. none
// clears draft_model (a note on `log` when it named one); draft-simple needs draft_model and sets
// options.hybrid to whether an ngram type came with it; ngram types alone clear draft_model and
// return true: the command drafts by prompt lookup alone (DrafterKind::Ngram). An explicit
// --draft-hybrid/--no-draft-hybrid that contradicts the list fails. Without --spec-type:
// nothing changes, false.
bool apply_spec_type(const SpecType& type, DraftModelOptions& options, std::string& draft_model,
                     std::ostream& log);

// Throws specdec::Error for a bad --draft-type or --draft-head-type, before anything loads.
void check_draft_model_options(const DraftModelOptions& options);

// The -md model, or nullptr when no draft was given (empty path); its weights laid out as
// options say (--draft-type, --draft-head-type, and --draft-vocab, which cuts the head to the
// most frequent tokens at load).
std::unique_ptr<LoadedModel> load_draft(
    const std::string& path, const DraftModelOptions& options = {},
    gguf::GgufFile::Access access = gguf::GgufFile::Access::Map);
// How --no-mmap / --mmap say the model files come in.
inline gguf::GgufFile::Access file_access(const DeviceOptions& d) {
  return d.no_mmap ? gguf::GgufFile::Access::Read : gguf::GgufFile::Access::Map;
}

// --ngram-max, --ngram-min, --ngram-policy, --ngram-verify-cost and --ngram-adapt-rate into
// params; `given` is set when any of them appears (they only make sense with --draft-ngram).
void add_ngram_options(ArgParser& p, NgramParams& params, bool& given);
// After parsing, before any model is loaded: throws specdec::Error on a bad combination.
void check_ngram_options(const NgramParams& params, bool given, bool draft_ngram);
// "n 1..3, adaptive, verify cost 0.36" / "n 1..3, fixed": how summaries describe the drafter.
std::string describe_ngram(const NgramParams& params);

}  // namespace specdec::cli
