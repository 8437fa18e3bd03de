// A generation session over a target model and an optional draft model: prefill, the decode
// loop (speculative rounds when a drafter is available: the draft model, or prompt lookup over
// the text so far; plain target steps otherwise), stop conditions and streaming of complete
// UTF-8 text.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/dry_breakers.h"
#include "engine/embedding.h"
#include "engine/loaded_model.h"
#include "engine/slot_file.h"
#include "grammar/grammar.h"
#include "model/lora.h"
#include "sampling/distribution.h"
#include "speculative/ngram_drafter.h"
#include "speculative/speculative_decoder.h"
#include "speculative/token_origin.h"

namespace specdec {

class BatchCoordinator;
class GrammarVocab;
class ThreadPool;

struct EngineOptions {
  int32_t n_ctx = 4096;
  int n_threads = 1;
  // The draft model scores only the first this many rows of its head (the most frequent tokens
  // when it was loaded with its head in draft_head_order) plus each prompt's own tokens and the
  // control tokens (engine/draft_vocab.h); 0: the whole vocabulary. Lossless either way.
  int32_t draft_vocab = 0;
  // Sequences decoded at once (batched serving): each slot has its own KV caches and prompt
  // cache, and generate() calls on different slots, from different threads, share forward passes
  // (engine/batch_coordinator.h). 1: a single sequence, no coordination.
  int32_t n_slots = 1;
  // With several slots: prompts are prefilled in chunks of this many tokens, each chunk one
  // batched pass, so that a long prompt does not stall the other slots' decoding.
  int32_t prefill_chunk = 32;
  // With several slots generating, greedy requests, and sampled ones without a fixed seed
  // (GenerationOptions::fixed_seed), draft at most batch_gamma_cap tokens per round: the γ a
  // per-slot cost model finds best for the slots generating (active) and the request's own
  // acceptance so far, since verify rows are compute bound and the slots' rows add up
  // (engine/batch_gamma.h); a slot alone is not capped. Their draft model reads the prompt only
  // when it first drafts, and only while catch_up_pays. Greedy output does not depend on γ.
  // Seeded sampled requests keep their γ: their random stream, and so their text, would depend
  // on the batch otherwise. batch_row_cost is one more row of a target pass in decode steps, past
  // the first few that ride on the weights' read (BatchCost::flat_rows; `specdec verify-cost`:
  // 0.13-0.15 on the Qwen2.5-Coder 1.5B over 4-32 rows, 2 threads); 0 or less: no cap.
  float batch_row_cost = 0.15f;
  // With one slot (no batching): greedy requests and sampled ones without a fixed seed take
  // their first token as a plain target step, and their draft model reads the prompt after it,
  // and only while catch_up_pays (alone: lag <= 4 x tokens left), as batched slots always do.
  // The time to first token is then the target's prefill alone. `serve` sets it; `run` and
  // `bench` do not, so that their decode rates do not carry the draft's prompt read. Seeded
  // sampled requests draft from the first round either way, so that their text equals `run
  // --seed`'s. Greedy output does not depend on it.
  bool draft_after_first_token = false;
  // With several slots: a request whose prompt shares a longer prefix with what another slot's
  // caches hold (a system prompt in use elsewhere) than with its own slot's copies those K/V
  // entries instead of recomputing them. They are the same bits (same tokens, same positions,
  // a batch-invariant forward pass), so only the time to first token changes.
  bool share_prefixes = true;
  // How the target's KV caches store K and V (model/kv_cache.h): f32 by default; f16 halves their
  // memory and attention's reads, q8_0 takes 17/64 of f32. Speculation stays exact for each: the
  // target that verifies uses the same cache type as target-only decoding would.
  KvTypes kv_types = {};
  // The draft's caches, when they differ from the target's (nullopt: the same types). Any type
  // keeps the output exact: the draft's cache only changes q, and the accept/reject rule is
  // exact for any q; a cheaper cache changes speed and acceptance, never the text at T = 0.
  std::optional<KvTypes> draft_kv_types = std::nullopt;
};

// Where a request's drafts come from. The choice is per request (not per Engine) so that one
// engine, e.g. a server's, can serve prompt-lookup and draft-model requests side by side.
enum class DrafterKind {
  Model,  // the draft model given to the Engine; without one, target-only decoding
  Ngram,  // prompt lookup (NgramDrafter): needs no draft model
};
const char* drafter_kind_name(DrafterKind kind);  // "model" / "ngram"

struct GenerationOptions {
  int32_t max_tokens = 128;  // < 0: until end of generation or a full context
  SamplingParams sampling;
  // Repetition, presence and frequency penalties and logit bias (sampling/penalties.h), applied
  // to the target's distributions and the draft's alike; none by default.
  PenaltyParams penalties;
  std::vector<std::string> stop;
  // Token ids that end the text as an end-of-generation token does (vLLM's stop_token_ids).
  std::vector<int32_t> stop_token_ids;
  // No end-of-generation token (unless ignore_eos) nor stop_token_ids before this many tokens
  // were generated (vLLM's min_tokens; PenaltyParams::min_tokens, exact under speculation).
  int32_t min_tokens = 0;
  bool ignore_eos = false;
  bool speculative = true;  // when the chosen drafter is available
  DrafterKind drafter = DrafterKind::Model;
  NgramParams ngram;      // for DrafterKind::Ngram
  int32_t draft_max = 5;  // γ
  // Draft model: fixed γ or the adaptive expected-gain rule, with llama.cpp's p_min and n_min
  // (min_drafts, which also drops short lookup proposals: SpeculativeDecoder::set_min_drafts).
  DraftLengthParams draft_length;
  // Draft model: the most text tokens a catch-up reads (ModelDrafter::set_context_window); a
  // draft that lags by more reads only the last ones. 0: whole text. Not applied where slots
  // share draft rows (batched serving with prefix sharing), whose rows must be a prefix.
  int32_t draft_context = 0;
  // With a draft model: a round takes prompt lookup's drafts (`ngram` settings) when the lookup
  // proposes at least 2 tokens, and the model's otherwise (speculative/hybrid_drafter.h).
  bool hybrid = false;
  // Per generated token, its log-probability under the target's own distribution and this many
  // alternatives (0..kMaxTopLogprobs); -1: none. Costs one log-softmax per token.
  int32_t logprobs = -1;
  // Those entries from the distribution each token was sampled from instead (llama-server's
  // post_sampling_probs): after the filters, penalties and grammar; one-hot when greedy.
  bool post_sampling_probs = false;
  // Per prompt token after the first, its log-probability given the tokens before it under the
  // target's distribution, with this many alternatives (0..kMaxTopLogprobs); -1: none (the
  // completions API's `echo` with `logprobs`: scoring a text). The target then reads the whole
  // prompt again (a cached row holds K/V but no logits, so no prefix is reused or shared), with
  // logits for every row.
  int32_t prompt_logprobs = -1;
  // Structured output: only text this grammar (grammar/grammar.h, compiled from GBNF, a JSON
  // Schema or the JSON grammar; grammar/json_schema.h) can continue may be generated, and an
  // end-of-generation token only where the text is a whole sentence of it. Applied to the
  // target's distributions and the draft's alike (engine/grammar_constraint.h): the output
  // distribution is the target's restricted to the grammar, and greedy output target-only
  // constrained greedy output. An end-of-generation token ends the text even with ignore_eos:
  // the grammar allows one only where its sentence is whole, and nothing but more of them after
  // it, so going on would only pad the text with end tokens. null: none.
  std::shared_ptr<const Grammar> grammar;
  // A lazy grammar: the text is free until this appears in it, and follows `grammar` from its
  // first byte on (engine/grammar_constraint.h; tool calls under tool_choice auto). Empty: the
  // grammar holds from the start.
  std::string grammar_trigger;
  // llama-server's reasoning budget (engine/reasoning_budget.h): with a model whose chat template
  // thinks (ChatTemplate::thinking()), at most this many tokens inside a <think> block, after
  // which reasoning_budget_message and "</think>" are forced and the answer follows. Applied to
  // both models' distributions as a grammar is, so speculation stays exact. -1: no budget.
  int32_t reasoning_budget = -1;
  std::string reasoning_budget_message;
  // Code completion (llama-server's n_indent; engine/indent_limit.h): from the text's second
  // line on, a line indented by fewer than this many spaces or tabs ends the text before its
  // first other character (finish: Stop). 0: off.
  int32_t min_indent = 0;
  // llama-server's t_max_predict_ms: once the text holds a newline, generation ends (finish:
  // Length) when this many milliseconds have passed since the prompt was read. The text then
  // depends on the machine's speed, which is what the client asked for. 0: off.
  double newline_time_limit_ms = 0;
  // The caller fixed sampling.seed and expects the same text from it in any batch, so a sampled
  // request's γ must not follow the batch (EngineOptions::batch_row_cost). false (a server
  // request that gave no seed): the text is a fresh draw either way and γ may follow the batch.
  bool fixed_seed = true;
  // Where the engine counts the tokens this generation has committed so far, as they come (a
  // server's GET /slots reads it from another thread while the request runs). null: nowhere.
  std::shared_ptr<std::atomic<int32_t>> decoded_counter;
  // The scale of each of the target's LoRA adapters for this request (Engine::target_lora(), in
  // order; 0 leaves an adapter out). nullopt: Engine::lora_scales(). A slot whose cache was
  // computed at other scales reads the prompt again, and prompt rows are shared only between
  // slots at the same scales. The draft has no adapters: speculation stays exact.
  std::optional<std::vector<float>> lora_scales;
  // Set: the request is an embedding, not a generation. The target reads the prompt (which may
  // then fill the whole context) and GenerationResult::embedding gets its pooled vector (or,
  // with Pooling::None, one per token); nothing is generated and no other option applies. The
  // text callback gets empty text between the read's chunks; returning false cancels.
  std::optional<EmbeddingParams> embedding;
};

enum class FinishReason { Length, Stop, EndOfGeneration, ContextFull, Cancelled };
const char* finish_reason_name(FinishReason r);

struct GenerationStats {
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;  // of the prompt, reused from the slot's cache (not recomputed)
  // Of cached_tokens, those copied from another slot's cache (EngineOptions::share_prefixes).
  int32_t shared_tokens = 0;
  // Prompt rows the draft's cache copied from another slot's instead of reading them (when the
  // request starts, or as its draft reads the prompt, from a slot whose draft read it since).
  int32_t draft_shared_tokens = 0;
  int32_t generated_tokens = 0;
  double prefill_ms = 0;
  double decode_ms = 0;
  bool speculative = false;
  const char* drafter = "";  // drafter_kind_name of the drafter used; "" when not speculative
  NgramParams ngram;         // when drafter is "ngram"
  int32_t draft_max = 0;
  DecodeStats spec;  // rounds, drafted, accepted, histogram, per-round log
};

struct GenerationResult {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<TokenOrigin> origins;    // one per token: where it came from
  std::vector<TokenLogprob> logprobs;  // one per token when GenerationOptions::logprobs >= 0
  // With GenerationOptions::prompt_logprobs: one per prompt token after the first (entry i is
  // prompt[i + 1]'s; prompt_scoring.h).
  std::vector<TokenLogprob> prompt_logprobs;
  // With GenerationOptions::embedding: the prompt's embedding (embed_tokens).
  std::vector<std::vector<float>> embedding;
  FinishReason finish = FinishReason::Length;
  // With finish Stop: the stop string that ended the text ("" when min_indent did).
  std::string stop_text;
  GenerationStats stats;
};

// Receives each chunk of complete UTF-8 text as soon as it is final; returning false cancels.
using TextCallback = std::function<bool(std::string_view)>;
// The same chunks split into runs of one token origin each (the attribution rule is in
// engine/text_origins.h); the concatenated pieces are exactly the text TextCallback gets.
using PieceCallback = std::function<bool(std::string_view text, TokenOrigin origin)>;
// With GenerationOptions::logprobs: called just before each text chunk with the entries of the
// tokens consumed since the previous call (so a stream can attach them to that chunk), and once
// at the end for the rest; over a whole generation it sees GenerationResult::logprobs in order.
// With GenerationOptions::prompt_logprobs, a first call before any text carries
// GenerationResult::prompt_logprobs (when the prompt has more than one token).
using LogprobCallback = std::function<void(std::span<const TokenLogprob>)>;

// How many leading tokens a and b share (a slot's history and a prompt: what a request would
// reuse).
size_t shared_prefix(std::span<const int32_t> a, std::span<const int32_t> b);

class Engine {
 public:
  // Checks draft/target vocabulary compatibility (throws specdec::Error on mismatch).
  Engine(LoadedModel& target, LoadedModel* draft, const EngineOptions& options);
  ~Engine();

  const Tokenizer& tokenizer() const { return *target_.tokenizer; }
  const ModelConfig& target_config() const { return target_.model->config(); }
  // The LoRA adapters the target was loaded with, at their load-time scales (model/lora.h).
  std::span<const ActiveLora> target_lora() const { return target_.model->lora(); }
  // The scale each of them runs at for a request that gives none (GenerationOptions::
  // lora_scales): the load-time scales until set_lora_scales (llama-server's POST
  // /lora-adapters) changes them. Throws specdec::Error for a count other than the adapters'
  // or a scale that is not finite.
  std::vector<float> lora_scales() const;
  void set_lora_scales(std::span<const float> scales);
  const ChatTemplate& chat_template() const { return *target_.chat_template; }
  int32_t n_ctx() const { return options_.n_ctx; }
  bool has_draft() const { return draft_ != nullptr; }  // a draft *model* was given
  // Logits the draft model computed per position in slot 0's last generation: its vocabulary
  // subset's size, or its head's rows (0 without a draft model).
  int32_t draft_vocab_width() const;
  // The vocabulary as grammars see it (engine/grammar_constraint.h), built on first use.
  std::shared_ptr<const GrammarVocab> grammar_vocab() const;

  // Tokenizes a prompt the way llama.cpp does (BOS per the vocabulary, special tokens parsed);
  // a chat-formatted prompt that already starts with the BOS text gets no second BOS.
  std::vector<int32_t> tokenize_prompt(std::string_view text) const;

  int32_t n_slots() const { return options_.n_slots; }
  // The tokens slot `slot`'s caches were last filled from (its reusable prompt prefix).
  std::vector<int32_t> slot_history(int32_t slot) const;
  // How many leading tokens of prompt a request at these LoRA scales (GenerationOptions::
  // lora_scales) would find in slot `slot`'s history: none where the slot's rows were computed
  // at other scales (or at scales that do not fit the adapters, which generate() refuses).
  size_t reusable_prefix(int32_t slot, std::span<const int32_t> prompt,
                         const std::optional<std::vector<float>>& lora_scales);
  // A slot's cached text on disk (llama-server's POST /slots/N?action=save|restore|erase,
  // `specdec run --prompt-cache`; engine/slot_file.h). Each may only be called while no
  // generate() runs on that slot (a server reserves the slot first); other slots may run.
  struct SlotFileStats {
    int32_t tokens = 0;        // of text, with the target's K/V for each
    int32_t draft_tokens = 0;  // of them, with the draft's K/V too
    uint64_t bytes = 0;        // of the file
  };
  // Writes the first max_tokens (< 0: all) of the tokens slot `slot` caches, with their K/V.
  SlotFileStats save_slot(int32_t slot, const std::string& path, int32_t max_tokens = -1);
  // Replaces what the slot caches with what `path` holds, which must come from this target model
  // with the same cache types (the draft's rows are skipped when they come from another draft
  // or types: the draft then reads the text again). A request whose prompt starts with the
  // restored text reuses it as if the slot had read it. On an error (specdec::Error naming the
  // file and the reason) the slot is as it was when the file was refused before its entries were
  // read (missing, not a slot file, another model, other cache types, too long), and empty when
  // it failed while they were (truncated, corrupt). The file says which LoRA scales its target
  // rows were computed at (a file from before it did: the default scales, lora_scales()); the
  // slot then holds rows at those scales, which requests at those scales reuse, and a request at
  // others empties.
  SlotFileStats restore_slot(int32_t slot, const std::string& path);
  // Forgets what the slot caches; returns how many tokens it held (with their K/V, as
  // save_slot would count them).
  int32_t erase_slot(int32_t slot);
  // Called after every batched pass (several slots only) with its rows and sequences; an empty
  // fn removes the observer.
  void set_pass_observer(std::function<void(bool target, int64_t rows, int64_t sequences)> fn);

  // Throws specdec::Error if the prompt does not fit the context. With several slots, calls on
  // different slots may run at the same time on different threads (one call per slot at a
  // time); their passes are batched, and each result is what the slot would produce alone.
  GenerationResult generate(std::span<const int32_t> prompt, const GenerationOptions& options,
                            const TextCallback& on_text, const LogprobCallback& on_logprobs = {},
                            int32_t slot = 0);
  // generate(), streaming each piece with the origin of the tokens it shows (specdec run
  // --color).
  GenerationResult generate_pieces(std::span<const int32_t> prompt,
                                   const GenerationOptions& options, const PieceCallback& on_piece);

 private:
  // Both of the above: on_text gets each chunk whole (as it always did), on_piece its runs.
  GenerationResult run(std::span<const int32_t> prompt, const GenerationOptions& options,
                       const TextCallback& on_text, const PieceCallback& on_piece,
                       const LogprobCallback& on_logprobs, int32_t slot);

  // run() for an embedding request (GenerationOptions::embedding) on slot s, its tokens
  // checked against the vocabulary by run(). Between the
  // chunks of a long input it calls on_text with no text: false (the client left) stops it,
  // finish Cancelled.
  GenerationResult embed(std::span<const int32_t> prompt, const EmbeddingParams& params,
                         const TextCallback& on_text, int32_t slot);

  // gguf::content_fingerprint of the target's and the draft's files, taken on first use.
  uint64_t fingerprint(bool draft);

  LoadedModel& target_;
  LoadedModel* draft_;
  std::mutex fingerprint_mu_;
  std::optional<uint64_t> target_fingerprint_, draft_fingerprint_;
  mutable std::mutex lora_mu_;
  std::vector<float> lora_scales_;  // lora_scales()
  EngineOptions options_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<BatchCoordinator> coordinator_;  // with several slots
  std::mutex pool_guard_;  // slots take turns using the pool for distributions
  mutable std::mutex grammar_vocab_mu_;
  mutable std::shared_ptr<const GrammarVocab> grammar_vocab_;
  std::unique_ptr<DryBreakerCache> dry_breakers_;  // DRY's breakers by breaker list
  struct Sequences;
  std::vector<std::unique_ptr<Sequences>> slots_;
  // The slot, or specdec::Error for a number outside [0, n_slots).
  Sequences& slot_at(int32_t slot);
  // Empties slot s's caches and history, withdrawing what it offered other slots.
  void clear_slot(Sequences& s);
  // A request's LoRA scales: its own, or lora_scales() when it gives none.
  std::vector<float> lora_scales_for(const std::optional<std::vector<float>>& requested) const;
  // Slot s's target runs at the request's LoRA scales (or lora_scales()) from now on: its caches
  // are emptied if they were computed at others. Throws for scales that do not fit.
  void use_lora_scales(Sequences& s, const std::optional<std::vector<float>>& requested);
  // Slot s's target and draft caches with their models' fingerprints, as slot files name them
  // (no draft cache without a draft model); the target's with the lora_fingerprint of the
  // scales its rows are at mixed in (target_fingerprint).
  std::pair<SlotCachePart, SlotCachePart> cache_parts(Sequences& s, uint64_t lora_key);
  uint64_t target_fingerprint(uint64_t lora_key);
  // Guards every slot's Sequences::shared, shared_draft, claim, reading and draft_reading, and is
  // held while one slot copies entries from another's caches (share_prefix, copy_draft_rows).
  std::mutex share_mu_;
  // Signalled when a slot reading its prompt offers more of it, or stops reading.
  std::condition_variable share_cv_;
  // Before slot s changes its caches past n_cached: withdraws what it offered past that (the
  // draft's offer at most what its cache holds).
  void withdraw_offer(Sequences& s, int32_t n_cached);
  // After withdraw_offer: waits
  // while another slot is still reading a prompt that shares at least a prefill chunk more with
  // this one than what is offered (its rows come for a copy instead of being computed twice in
  // the same passes); copies the longest prefix of prompt (at most its n_prompt - 1 tokens)
  // that another slot offers beyond n_cached; and claims the rest of the prompt as its own to
  // read. Returns the prefix length now cached.
  int32_t share_prefix(Sequences& s, std::span<const int32_t> prompt, int32_t n_cached);
  // Offers s's first n_target tokens (their target K/V entries; the first n_draft of them in the
  // draft's cache too) to other slots until s's next request starts; s no longer reads a prompt.
  void offer_prefix(Sequences& s, std::span<const int32_t> tokens, int32_t n_target,
                    int32_t n_draft);
  // While s reads its prompt: offers the prompt rows its target and draft caches hold so far.
  void offer_read_rows(Sequences& s, std::span<const int32_t> prompt);
  // s's draft, about to read prompt rows from its cache's length on: copies up to max of them
  // from another slot's draft cache that offers them.
  void copy_draft_rows(Sequences& s, std::span<const int32_t> prompt, int32_t max);
  // s's request ended (or failed): it no longer reads its prompt with either model; wakes the
  // waiters.
  void stop_reading(Sequences& s);
  // Under share_mu_: the slot whose draft offers the longest prefix of prompt past have (at
  // most want rows), and that length (have when none does).
  std::pair<Sequences*, int32_t> draft_source(const Sequences& s, std::span<const int32_t> prompt,
                                              int32_t have, int32_t want) const;
  // Under share_mu_: whether another slot's draft is reading at least a prefill chunk of prompt
  // beyond `available`.
  bool other_draft_reading(const Sequences& s, std::span<const int32_t> prompt,
                           int32_t available) const;
  // s's draft, holding the first `held` rows of prompt, would read the rest now: claims them,
  // unless another slot's draft is reading at least a prefill chunk of them beyond what is
  // offered (then false: s drafts nothing this round and copies those rows once offered).
  bool claim_draft_read(Sequences& s, std::span<const int32_t> prompt, int32_t held);
};

}  // namespace specdec
