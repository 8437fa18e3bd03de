#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "common/error.h"
#include "engine/batch_coordinator.h"
#include "engine/batch_gamma.h"
#include "engine/constraint_chain.h"
#include "engine/draft_vocab.h"
#include "engine/grammar_constraint.h"
#include "engine/indent_limit.h"
#include "engine/model_lm.h"
#include "engine/prompt_scoring.h"
#include "engine/reasoning_budget.h"
#include "engine/stop_matcher.h"
#include "engine/text_origins.h"
#include "engine/vocab_compat.h"
#include "gguf/gguf_fingerprint.h"
#include "speculative/hybrid_drafter.h"
#include "tensor/thread_pool.h"

namespace specdec {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Length:
      return "length";
    case FinishReason::Stop:
      return "stop";
    case FinishReason::EndOfGeneration:
      return "eos";
    case FinishReason::ContextFull:
      return "context_full";
    case FinishReason::Cancelled:
      return "cancelled";
  }
  return "?";
}

const char* drafter_kind_name(DrafterKind kind) {
  switch (kind) {
    case DrafterKind::Model:
      return "model";
    case DrafterKind::Ngram:
      return "ngram";
  }
  return "?";
}

size_t shared_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  return static_cast<size_t>(std::ranges::mismatch(a, b).in1 - a.begin());
}

namespace {
// How many of the first n tokens of a and b (n at most either's size) are the same.
int32_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b, int32_t n) {
  return static_cast<int32_t>(shared_prefix(a.first(static_cast<size_t>(n)), b));
}

// With several slots a request's passes join the batch until it returns, however it returns
// (the coordinator would otherwise wait for it forever).
class BatchMembership {
 public:
  explicit BatchMembership(BatchCoordinator* coordinator) : c_(coordinator) {
    if (c_) c_->join();
  }
  ~BatchMembership() {
    if (c_) c_->leave();
  }
  BatchMembership(const BatchMembership&) = delete;
  BatchMembership& operator=(const BatchMembership&) = delete;

 private:
  BatchCoordinator* c_;
};
}  // namespace

// The KV caches of one sequence, plus the tokens they were filled from, so that a following
// request sharing a prefix (the next chat turn) does not recompute it.
struct Engine::Sequences {
  ModelLM target;
  std::unique_ptr<ModelLM> draft;
  std::vector<int32_t> history;  // tokens whose K/V may still be in the caches
  // What other slots may copy (Engine::share_prefix; under Engine::share_mu_): the tokens whose
  // target K/V entries stay as they are until this slot's next request starts, and how many of
  // them the draft's cache holds too (while the draft reads ahead of its target, more: a copier
  // takes no more than both). Only rows a slot has committed, never rows a rollback may
  // rewrite: its prompt's rows as it reads them, all its caches hold once it is idle.
  std::vector<int32_t> shared;
  int32_t shared_draft = 0;
  // While reading is true the slot is computing its prompt's rows (all but the last token's:
  // claim, kept for the whole request), offering them in shared as they come; a slot starting on
  // a prompt that shares them waits for them (Engine::share_prefix).
  std::vector<int32_t> claim;
  bool reading = false;
  // Its draft is reading the claimed prompt (lazily, in a batch); others wait for its rows.
  bool draft_reading = false;
  int32_t draft_copied = 0;  // this request's GenerationStats::draft_shared_tokens
  // lora_fingerprint of the adapters at the scales the target's cache rows were computed at
  // (written under Engine::share_mu_, which other slots read it under).
  uint64_t lora_key = 0;
  std::vector<float> lora_scales;  // the scales lora_key is the fingerprint of (slot files)
  // Where the draft's cache starts in the history: 0, or where a context window re-based it
  // (ModelDrafter::base); its rows then hold history[draft_base..). Kept for the slot's next
  // request, whose draft keeps the rows its prompt still shares.
  int32_t draft_base = 0;
  Sequences(Model& t, Model* d, int32_t n_ctx, ThreadPool& pool, KvTypes target_types,
            KvTypes draft_types)
      : target(t, n_ctx, pool, target_types),
        draft(d ? std::make_unique<ModelLM>(*d, n_ctx, pool, draft_types) : nullptr) {}
};

Engine::Engine(LoadedModel& target, LoadedModel* draft, const EngineOptions& options)
    : target_(target), draft_(draft), options_(options) {
  if (options_.n_ctx < 2) fail("context size must be at least 2, got ", options_.n_ctx);
  if (draft_ != nullptr) check_vocab_compatible(*draft_->tokenizer, *target_.tokenizer);
  if (options_.n_slots < 1 || options_.n_slots > 256) {
    fail("slots must be in [1, 256], got ", options_.n_slots);
  }
  pool_ = std::make_unique<ThreadPool>(std::max(1, options_.n_threads));
  for (const ActiveLora& a : target_.model->lora()) lora_scales_.push_back(a.scale);
  dry_breakers_ = std::make_unique<DryBreakerCache>(*target_.tokenizer);
  if (options_.draft_vocab < 0)
    fail("draft vocabulary size must be >= 0, got ", options_.draft_vocab);
  if (options_.n_slots > 1) {
    coordinator_ = std::make_unique<BatchCoordinator>(*pool_);
    coordinator_->set_primary(target_.model.get());
  }
  for (int32_t i = 0; i < options_.n_slots; ++i) {
    auto s = std::make_unique<Sequences>(*target_.model, draft_ ? draft_->model.get() : nullptr,
                                         options_.n_ctx, *pool_, options_.kv_types,
                                         options_.draft_kv_types.value_or(options_.kv_types));
    s->lora_key = target_.model->lora_fingerprint();
    if (coordinator_) {
      s->target.set_coordinator(coordinator_.get(), options_.prefill_chunk);
      if (s->draft) s->draft->set_coordinator(coordinator_.get(), options_.prefill_chunk);
    }
    slots_.push_back(std::move(s));
  }
}

std::vector<int32_t> Engine::slot_history(int32_t slot) const {
  if (slot < 0 || slot >= options_.n_slots) fail("no slot ", slot);
  return slots_[static_cast<size_t>(slot)]->history;
}

size_t Engine::reusable_prefix(int32_t slot, std::span<const int32_t> prompt,
                               const std::optional<std::vector<float>>& lora_scales) {
  Sequences& s = slot_at(slot);
  const std::vector<float> scales = lora_scales_for(lora_scales);
  // Scales that do not fit match nothing (generate() refuses them).
  if (scales.size() != target_lora().size()) return 0;
  const uint64_t key = lora_fingerprint(target_lora(), scales);
  {
    const std::lock_guard<std::mutex> lock(share_mu_);
    if (s.lora_key != key) return 0;
  }
  return shared_prefix(s.history, prompt);
}

Engine::Sequences& Engine::slot_at(int32_t slot) {
  if (slot < 0 || slot >= options_.n_slots) {
    fail("slot ", slot, " does not exist (the engine has ", options_.n_slots, ")");
  }
  return *slots_[static_cast<size_t>(slot)];
}

uint64_t Engine::fingerprint(bool draft) {
  const std::lock_guard<std::mutex> lock(fingerprint_mu_);
  std::optional<uint64_t>& fp = draft ? draft_fingerprint_ : target_fingerprint_;
  if (!fp) {
    const LoadedModel& m = *(draft ? draft_ : &target_);
    fp = gguf::content_fingerprint(*m.file);
  }
  return *fp;
}

std::vector<float> Engine::lora_scales() const {
  const std::lock_guard<std::mutex> lock(lora_mu_);
  return lora_scales_;
}

std::vector<float> Engine::lora_scales_for(
    const std::optional<std::vector<float>>& requested) const {
  return requested ? *requested : lora_scales();
}

void Engine::set_lora_scales(std::span<const float> scales) {
  check_lora_scales(target_lora(), scales);
  const std::lock_guard<std::mutex> lock(lora_mu_);
  lora_scales_.assign(scales.begin(), scales.end());
}

void Engine::use_lora_scales(Sequences& s, const std::optional<std::vector<float>>& requested) {
  std::vector<float> scales = lora_scales_for(requested);
  check_lora_scales(target_lora(), scales);
  const uint64_t key = lora_fingerprint(target_lora(), scales);
  // Adapters change every K/V row after the first layer: rows computed at other scales are
  // another model's. (The draft's rows are its own model's alone; they go too, as the history
  // they are a prefix of does.)
  if (key != s.lora_key) {
    clear_slot(s);
    s.lora_scales = scales;
    const std::lock_guard<std::mutex> lock(share_mu_);
    s.lora_key = key;
  }
  s.target.set_lora_scales(std::move(scales));
}

uint64_t Engine::target_fingerprint(uint64_t lora_key) {
  // Slots computed with other adapters (or scales, or none) are another model's.
  uint64_t target = fingerprint(false);
  if (lora_key != 0) target = (target ^ lora_key) * 0x9e3779b97f4a7c15ull;
  return target;
}

std::pair<SlotCachePart, SlotCachePart> Engine::cache_parts(Sequences& s, uint64_t lora_key) {
  return {{&s.target.mutable_cache(), target_fingerprint(lora_key)},
          {s.draft ? &s.draft->mutable_cache() : nullptr, s.draft ? fingerprint(true) : 0}};
}

void Engine::clear_slot(Sequences& s) {
  if (coordinator_ && options_.share_prefixes) withdraw_offer(s, 0);
  s.history.clear();
  s.target.truncate(0);
  if (s.draft) s.draft->truncate(0);
  s.draft_base = 0;
}

Engine::SlotFileStats Engine::save_slot(int32_t slot, const std::string& path, int32_t max_tokens) {
  Sequences& s = slot_at(slot);
  auto n = std::min(static_cast<int32_t>(s.history.size()), s.target.length());
  if (max_tokens >= 0) n = std::min(n, max_tokens);
  // A draft reading a context window holds history[draft_base, ...): the part of it that lies
  // within the n tokens saved.
  const int32_t n_draft =
      s.draft ? std::clamp(std::min(s.draft->length(), n - s.draft_base), 0, n) : 0;
  const int32_t draft_base = n_draft > 0 ? s.draft_base : 0;
  // A slot no request has run on holds no rows; its file says the default scales.
  std::vector<float> scales = s.lora_scales;
  uint64_t key = s.lora_key;
  if (scales.size() != target_lora().size()) {
    scales = lora_scales();
    key = lora_fingerprint(target_lora(), scales);
  }
  const auto [target, draft] = cache_parts(s, key);
  const SlotFileWritten written =
      write_slot_file(path, std::span<const int32_t>(s.history).first(static_cast<size_t>(n)),
                      target, draft, n_draft, draft_base, scales);
  return {n, n_draft, written.bytes};
}

Engine::SlotFileStats Engine::restore_slot(int32_t slot, const std::string& path) {
  Sequences& s = slot_at(slot);
  // The target's rows are at the scales the file names (a version 1 file names none: the
  // default scales then), which must fit this target's adapters; the section's fingerprint
  // must be theirs.
  std::vector<float> scales;
  uint64_t lora_key = 0;
  const auto fingerprint_at = [&](const std::vector<float>* in_file) {
    scales = in_file != nullptr ? *in_file : lora_scales();
    try {
      check_lora_scales(target_lora(), scales);
    } catch (const Error& e) {
      fail(path,
           " was written for another model (its LoRA scales do not fit the target's "
           "adapters: ",
           e.what(), ")");
    }
    lora_key = lora_fingerprint(target_lora(), scales);
    return target_fingerprint(lora_key);
  };
  const auto [target, draft] = cache_parts(s, s.lora_key);
  // The slot stays as it was until the file's entries start to come in (a missing or refused
  // file costs it nothing); from then on a failure empties it.
  bool emptied = false;
  SlotFileRead read;
  try {
    read = read_slot_file(
        path, target, target_.model->config().n_vocab, draft,
        [&] {
          clear_slot(s);
          emptied = true;
          s.lora_scales = scales;
          const std::lock_guard<std::mutex> lock(share_mu_);
          s.lora_key = lora_key;
        },
        fingerprint_at);
  } catch (...) {
    if (emptied) clear_slot(s);
    throw;
  }
  s.history = std::move(read.tokens);
  s.draft_base = read.draft_base;
  const auto n = static_cast<int32_t>(s.history.size());
  // Other slots copy draft rows only from a draft that starts at the text's start.
  if (coordinator_ && options_.share_prefixes) {
    offer_prefix(s, s.history, n, read.draft_base == 0 ? read.draft_rows : 0);
  }
  return {n, read.draft_rows, read.bytes};
}

int32_t Engine::erase_slot(int32_t slot) {
  Sequences& s = slot_at(slot);
  // The tokens it could have reused (save_slot's count): the last one may have no row yet.
  const auto n = std::min(static_cast<int32_t>(s.history.size()), s.target.length());
  clear_slot(s);
  return n;
}

void Engine::set_pass_observer(std::function<void(bool, int64_t, int64_t)> fn) {
  if (!coordinator_) return;
  if (!fn) {  // no observer from now on
    coordinator_->set_pass_observer({});
    return;
  }
  const Model* target = target_.model.get();
  coordinator_->set_pass_observer(
      [fn = std::move(fn), target](const Model& m, int64_t rows, int64_t sequences) {
        fn(&m == target, rows, sequences);
      });
}

int32_t Engine::draft_vocab_width() const {
  return slots_[0]->draft ? slots_[0]->draft->logit_width() : 0;
}

Engine::~Engine() = default;

std::vector<int32_t> Engine::tokenize_prompt(std::string_view text) const {
  return encode_prompt(tokenizer(), text);
}

std::shared_ptr<const GrammarVocab> Engine::grammar_vocab() const {
  const std::lock_guard<std::mutex> lock(grammar_vocab_mu_);
  if (!grammar_vocab_) grammar_vocab_ = make_grammar_vocab(tokenizer());
  return grammar_vocab_;
}

GenerationResult Engine::generate(std::span<const int32_t> prompt, const GenerationOptions& opts,
                                  const TextCallback& on_text, const LogprobCallback& on_logprobs,
                                  int32_t slot) {
  return run(prompt, opts, on_text, {}, on_logprobs, slot);
}

GenerationResult Engine::generate_pieces(std::span<const int32_t> prompt,
                                         const GenerationOptions& opts,
                                         const PieceCallback& on_piece) {
  return run(prompt, opts, {}, on_piece, {}, 0);
}

GenerationResult Engine::run(std::span<const int32_t> prompt, const GenerationOptions& opts,
                             const TextCallback& on_text, const PieceCallback& on_piece,
                             const LogprobCallback& on_logprobs, int32_t slot) {
  if (slot < 0 || slot >= options_.n_slots) {
    fail("slot ", slot, " does not exist (the engine has ", options_.n_slots, ")");
  }
  using Clock = std::chrono::steady_clock;
  const auto n_prompt = static_cast<int32_t>(prompt.size());
  if (n_prompt == 0) fail("the prompt is empty after tokenization");
  for (int32_t id : prompt) {
    if (id < 0 || id >= target_.model->config().n_vocab)
      fail("prompt token id ", id, " is out of range");
  }
  use_lora_scales(*slots_[static_cast<size_t>(slot)], opts.lora_scales);
  if (opts.embedding) return embed(prompt, *opts.embedding, on_text, slot);
  if (n_prompt >= options_.n_ctx) {
    fail("the prompt has ", n_prompt, " tokens but the context holds ", options_.n_ctx,
         " (raise -c or shorten the prompt)");
  }
  const int32_t n_vocab = target_.model->config().n_vocab;
  check_penalty_params(opts.penalties, n_vocab);
  check_sampling_params(opts.sampling);
  for (int32_t id : opts.stop_token_ids) {
    if (id < 0 || id >= n_vocab) fail("stop token id ", id, " is out of range");
  }
  if (opts.min_tokens < 0) fail("min_tokens must be >= 0, got ", opts.min_tokens);
  // min_tokens holds back whatever would end the text.
  PenaltyParams penalties = opts.penalties;
  // With a grammar an end token always ends the text (GenerationOptions::grammar); a lazy one
  // leaves the text free, ignore_eos included, until its trigger.
  const bool eos_ends =
      !opts.ignore_eos || (opts.grammar != nullptr && opts.grammar_trigger.empty());
  if (penalties.dry.active()) {
    penalties.dry_breakers = *dry_breakers_->get(penalties.dry.sequence_breakers);
  }
  if (opts.min_tokens > 0) {
    penalties.min_tokens = opts.min_tokens;
    penalties.min_tokens_ids = opts.stop_token_ids;
    if (eos_ends) {
      for (int32_t id : target_.tokenizer->eog_ids()) penalties.min_tokens_ids.push_back(id);
    }
  }
  if (opts.prompt_logprobs < -1 || opts.prompt_logprobs > kMaxTopLogprobs) {
    fail("prompt logprobs must be in [-1, ", kMaxTopLogprobs, "], got ", opts.prompt_logprobs);
  }
  // Scoring the prompt needs the logits of every prompt row, which cached rows do not keep.
  const bool scoring = opts.prompt_logprobs >= 0;
  const bool want_spec = opts.speculative && opts.draft_max > 0;
  const bool use_model = want_spec && opts.drafter == DrafterKind::Model && draft_ != nullptr;
  const bool use_ngram = want_spec && opts.drafter == DrafterKind::Ngram;
  const bool speculative = use_model || use_ngram;

  // Room left after the prompt: the last committed token still has to go through the target.
  const int32_t room = options_.n_ctx - n_prompt + 1;
  const bool budget_is_context = opts.max_tokens < 0 || room < opts.max_tokens;
  const int32_t budget = budget_is_context ? room : opts.max_tokens;

  // Reuse the longest prefix both caches still hold (the protocol needs the last prompt token
  // pending, hence at most n_prompt - 1).
  Sequences& s = *slots_[static_cast<size_t>(slot)];
  // The draft's cache may hold less (ModelDrafter::start reads the rest); it always holds a
  // prefix of the history.
  const int32_t limit =
      std::min({static_cast<int32_t>(s.history.size()), s.target.length(), n_prompt - 1});
  int32_t n_cached = scoring ? 0 : common_prefix(s.history, prompt, limit);
  // Other slots stop copying what this one offered past that before its caches change.
  if (coordinator_ && options_.share_prefixes) withdraw_offer(s, n_cached);
  // From here on the caches change past n_cached; if this run throws before it records its own
  // tokens, the history must not claim what the caches no longer hold.
  s.history.resize(static_cast<size_t>(n_cached));
  // The target's rows past n_cached are the earlier text's: cut now, not when the target reads
  // the prompt. A seeded request's draft reads first, and the slot offers the prompt rows its
  // target holds as each chunk comes (offer_read_rows): a stale row there would be copied by
  // another slot as this prompt's.
  s.target.truncate(n_cached);
  // An unused draft cache must still hold only a prefix of the history recorded below.
  // (A scoring request's decoder starts past the whole prompt, so its draft is cut here too.)
  // A scoring request takes no part in sharing: it reuses no prefix, and its rows are read with
  // logits, not in the prefill's chunks (the slot offers nothing until its next request).
  const bool sharing = coordinator_ && options_.share_prefixes && !scoring;
  // A draft cache re-based by a window is kept only for a model drafter that does not share
  // rows (which must be a prefix of the text): otherwise it is dropped here.
  if (s.draft && s.draft_base > 0 && (!use_model || scoring || sharing)) {
    s.draft->truncate(0);
    s.draft_base = 0;
  }
  if ((!use_model || scoring) && s.draft) {
    s.draft->truncate(std::min(s.draft->length(), n_cached));
  }
  // While it reads its prompt the slot offers the rows read so far, and its draft first copies
  // prompt rows another slot's draft offers; whatever ends this run ends both, and its claim.
  struct Reading {
    Engine* e;
    Sequences& s;
    ~Reading() {
      if (e == nullptr) return;
      s.target.set_prefix_hooks({}, {});
      if (s.draft) s.draft->set_prefix_hooks({}, {});
      e->stop_reading(s);
    }
  } reading{sharing ? this : nullptr, s};
  int32_t n_shared = 0;
  s.draft_copied = 0;
  if (sharing) {
    // Before this slot joins the batch: it may wait here for another slot's prompt rows, and the
    // passes must not wait for it meanwhile.
    const int32_t own = n_cached;
    n_cached = share_prefix(s, prompt, n_cached);
    n_shared = n_cached - own;
    s.target.set_prefix_hooks({}, [this, &s, prompt] { offer_read_rows(s, prompt); });
    if (s.draft && use_model) {
      s.draft->set_prefix_hooks(
          [this, &s, prompt](int32_t max) { copy_draft_rows(s, prompt, max); },
          [this, &s, prompt] { offer_read_rows(s, prompt); });
    }
  }
  const BatchMembership membership(coordinator_.get());

  // The draft scores the most frequent tokens, this prompt's own and, as the answer goes on,
  // the answer's own (changing which rows of its head it computes never touches its cache).
  std::optional<GrowingDraftVocab> draft_vocab;
  if (use_model && options_.draft_vocab > 0) {
    const Model& dm = *draft_->model;
    draft_vocab.emplace(*draft_->tokenizer, dm.logit_ids(), dm.head_rows(), options_.draft_vocab,
                        prompt);
    s.draft->set_vocab_subset(draft_vocab->subset());
  }

  std::unique_ptr<Drafter> drafter;
  std::unique_ptr<ModelDrafter> hybrid_model;  // the parts of a hybrid drafter
  std::unique_ptr<NgramDrafter> hybrid_lookup;
  // --draft-min (draft_length.min_drafts): the model drafts at least that many a round, and a
  // hybrid's lookup proposal shorter than it goes to the model (SpeculativeDecoder::
  // set_min_drafts says why).
  const int32_t min_drafts = opts.draft_length.min_drafts;
  if (use_model && opts.hybrid) {
    hybrid_model = std::make_unique<ModelDrafter>(*s.draft, opts.draft_length);
    hybrid_lookup = std::make_unique<NgramDrafter>(s.target.n_vocab(), opts.ngram);
    drafter = std::make_unique<HybridDrafter>(*hybrid_model, *hybrid_lookup,
                                              std::max(kHybridMinLookup, min_drafts));
  } else if (use_model) {
    drafter = std::make_unique<ModelDrafter>(*s.draft, opts.draft_length);
  } else if (use_ngram) {
    drafter = std::make_unique<NgramDrafter>(s.target.n_vocab(), opts.ngram);
  }
  std::optional<GrammarConstraint> grammar;
  if (opts.grammar) grammar.emplace(opts.grammar, grammar_vocab(), opts.grammar_trigger);
  std::optional<ReasoningBudgetConstraint> reasoning_budget;
  if (opts.reasoning_budget >= 0 && chat_template().thinking()) {
    reasoning_budget.emplace(reasoning_budget_spec(tokenizer(), prompt, opts.reasoning_budget,
                                                   opts.reasoning_budget_message),
                             [&tok = tokenizer()](int32_t id) { return tok.token_bytes(id); });
  }
  std::optional<ConstraintChain> chain;
  TokenConstraint* constraint = grammar ? static_cast<TokenConstraint*>(&*grammar) : nullptr;
  if (reasoning_budget) {
    // The budget first: its forced token must come out, and a grammar then sees that.
    if (grammar) {
      chain.emplace(std::vector<TokenConstraint*>{&*reasoning_budget, &*grammar});
      constraint = &*chain;
    } else {
      constraint = &*reasoning_budget;
    }
  }
  Rng rng(opts.sampling.seed);
  SpeculativeDecoder decoder =
      drafter ? SpeculativeDecoder(s.target, *drafter, opts.sampling, opts.draft_max, rng)
              : SpeculativeDecoder(s.target, nullptr, opts.sampling, 0, rng);
  // The pool is for one caller at a time: with several slots, a slot builds distributions on it
  // when no other slot is, on its own thread otherwise (same bits either way). The passes use
  // it only while every slot waits for them.
  decoder.set_thread_pool(pool_.get(), coordinator_ ? &pool_guard_ : nullptr);
  // Batched greedy requests, and sampled ones whose caller did not fix the seed, fit their γ
  // to the batch and their acceptance so far (engine.h, batch_row_cost); their draft model then
  // reads the prompt only once it drafts, and not at all while the batch leaves no room for
  // drafts or while what it would have to read outweighs what is left to generate. Their first
  // token is a plain target step, so that the draft's reading of the prompt comes after it, not
  // before (the time to first token is then the target's prefill alone). While the draft model
  // does not pay, a hybrid drafter drafts by prompt lookup alone. A lone slot with
  // draft_after_first_token takes the same rule as a batch of one: no cap, the alone read rule.
  ModelDrafter* model_drafter = hybrid_model ? hybrid_model.get()
                                : use_model  ? static_cast<ModelDrafter*>(drafter.get())
                                             : nullptr;
  // Shared draft rows must be a prefix of the text, which a windowed draft's are not. A
  // windowed draft's cache is kept for the slot's next request with where it starts
  // (draft_base), so that a follow-up turn whose prompt extends this text re-reads nothing; a
  // run that fails drops it (its rows may then hold text the history no longer records).
  if (model_drafter != nullptr && !sharing) {
    model_drafter->set_context_window(opts.draft_context);
    model_drafter->set_cache_base(s.draft_base);
  }
  struct KeepWindowedDraft {
    const ModelDrafter* drafter;
    Sequences& s;
    int exceptions = std::uncaught_exceptions();
    ~KeepWindowedDraft() {
      if (drafter == nullptr) return;
      s.draft_base = drafter->base();
      if (s.draft_base > 0 && std::uncaught_exceptions() > exceptions) {
        s.draft->truncate(0);
        s.draft_base = 0;
      }
    }
  } keep_windowed{model_drafter, s};
  const bool batched = coordinator_ && options_.batch_row_cost > 0;
  const bool lone_lazy = !coordinator_ && options_.draft_after_first_token && model_drafter;
  const bool batch_gamma = (batched || lone_lazy) && (opts.sampling.greedy() || !opts.fixed_seed);
  if (batch_gamma) {
    if (model_drafter) model_drafter->set_lazy_start(true);
    const BatchCost cost{options_.batch_row_cost, opts.draft_length.draft_cost};
    const double prior = opts.draft_length.prior_accept;
    auto* hybrid = hybrid_model ? static_cast<HybridDrafter*>(drafter.get()) : nullptr;
    decoder.set_gamma_limit([this, &decoder, &s, prompt, model_drafter, hybrid, budget, cost, prior,
                             n_cached, sharing] {
      if (model_drafter != nullptr && decoder.generated().empty()) return 0;
      const int32_t active = coordinator_ ? std::max(1, coordinator_->active()) : 1;
      // The acceptance so far, from a prior of 8 drafts at the draft-length rule's prior.
      const DecodeStats& st = decoder.stats();
      const double acceptance = (st.accepted + prior * 8) / (st.drafted + 8.0);
      const int32_t cap = batch_gamma_cap(cost, active, acceptance);
      if (model_drafter == nullptr) return cap;
      const auto n = static_cast<int32_t>(decoder.tokens().size());
      const auto left = budget - static_cast<int32_t>(decoder.generated().size());
      const double gain =
          cap == kNoGammaCap || cap == 0 ? 0.0 : batch_gamma_gain(cost, active, acceptance, cap);
      // With one slot (no batch), the rows of the prefix this request reused do not count
      // against the draft's reading: a prefix that came back once is taken to come back, and
      // the slot's following requests find its draft rows cached (a 617-token system prompt,
      // 96-token answers: 1.03-1.07x the aggregate). In a batch the same rule lost (0.92-0.94x
      // at 2 clients: the drafts then read every request's own part too, and did not win those
      // reads back; docs/benchmarks.md). While another slot's draft reads this prompt's rows,
      // this one waits for them: their copy (ModelLM's prefix hooks) is cheaper than reading
      // them in the same passes.
      const int32_t lag = model_drafter->lag(n);
      const int32_t held = n - lag;
      const int32_t free_end = coordinator_ ? held : n_cached;
      const int32_t read_lag = n - std::max(held, std::min(n, free_end));
      bool model_pays = cap > 0 && catch_up_pays(cost, read_lag, left, active, gain);
      // Only prompt rows are offered and copied: a draft that holds its prompt asks no one.
      const bool reads_prompt = sharing && held < static_cast<int32_t>(prompt.size()) - 1;
      if (model_pays && reads_prompt) model_pays = claim_draft_read(s, prompt, held);
      if (hybrid == nullptr) return model_pays ? cap : 0;
      // Where the draft model does not pay, prompt lookup still drafts what it matches: its
      // drafts cost no draft pass, only their verify rows, so its cap counts no draft cost.
      hybrid->set_model_allowed(model_pays);
      if (model_pays) return cap;
      BatchCost lookup_cost = cost;
      lookup_cost.draft_cost = 0.0;
      return batch_gamma_cap(lookup_cost, active, acceptance);
    });
  }
  decoder.set_min_drafts(min_drafts);
  decoder.set_logprobs(opts.logprobs, opts.post_sampling_probs);
  decoder.set_penalties(penalties);
  if (constraint != nullptr) decoder.set_constraint(constraint);
  const Tokenizer& tok = tokenizer();
  auto is_end = [&tok, &opts, eos_ends](int32_t id) {
    return (eos_ends && tok.is_eog(id)) ||
           std::find(opts.stop_token_ids.begin(), opts.stop_token_ids.end(), id) !=
               opts.stop_token_ids.end();
  };

  GenerationResult result;
  result.stats.prompt_tokens = n_prompt;
  result.stats.cached_tokens = n_cached;
  result.stats.shared_tokens = n_shared;
  result.stats.speculative = speculative;
  result.stats.drafter = drafter ? drafter->kind() : "";
  if (use_ngram || (use_model && opts.hybrid)) result.stats.ngram = opts.ngram;
  result.stats.draft_max = speculative ? opts.draft_max : 0;

  const auto t0 = Clock::now();
  int32_t start_cached = n_cached;
  if (scoring) {
    // Its chunks are batched passes like the prefill's; alone, larger ones (the logits are
    // n_vocab floats a row, so bounded).
    constexpr int32_t kLoneScoringChunk = 64;
    result.prompt_logprobs =
        score_prompt(s.target, prompt, opts.prompt_logprobs,
                     coordinator_ ? options_.prefill_chunk : kLoneScoringChunk);
    start_cached = n_prompt - 1;
    if (on_logprobs && !result.prompt_logprobs.empty()) on_logprobs(result.prompt_logprobs);
  }
  decoder.start(prompt, budget, is_end, start_cached);
  // The prompt's entries (all but its last token's) stay as they are for the whole generation:
  // rollbacks never go behind it. The draft's: only those it had before (it may read the prompt
  // later, lazily, and the slot's history does not cover those yet).
  if (sharing) offer_prefix(s, prompt, n_prompt - 1, s.shared_draft);
  const auto t1 = Clock::now();
  result.stats.prefill_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();

  StreamingDecoder text_stream(tok);
  StopMatcher stop(opts.stop);
  IndentLimit indent(opts.min_indent);
  bool newline = false, timed_out = false;  // for newline_time_limit_ms
  TextOrigins text_origins;                 // origins of the bytes the stop matcher holds back
  TokenOrigin last_text_origin = TokenOrigin::Target;  // of the last token that was text
  size_t seen = 0, logprobs_sent = 0;
  bool cancelled = false;
  // The logprobs of the tokens consumed so far that no callback has seen yet.
  auto flush_logprobs = [&] {
    if (!on_logprobs || logprobs_sent >= result.logprobs.size()) return;
    on_logprobs(std::span<const TokenLogprob>(result.logprobs).subspan(logprobs_sent));
    logprobs_sent = result.logprobs.size();
  };
  auto emit = [&](std::string text) {
    if (text.empty() || cancelled || indent.stopped()) return;
    text.resize(indent.push(text));
    newline = newline || text.find('\n') != std::string::npos;
    if (text.empty()) return;
    flush_logprobs();
    result.text += text;
    if (on_text && !on_text(text)) cancelled = true;
    text_origins.release(text, [&](std::string_view piece, TokenOrigin origin) {
      if (!cancelled && on_piece && !on_piece(piece, origin)) cancelled = true;
    });
  };
  auto push_text = [&](const std::string& text, TokenOrigin origin) {
    text_origins.append(text.size(), origin);
    emit(stop.push(text));
  };
  const auto stopped = [&] { return stop.stopped() || indent.stopped() || timed_out; };
  const auto over_time = [&] {
    return newline && opts.newline_time_limit_ms > 0 &&
           std::chrono::duration<double, std::milli>(Clock::now() - t1).count() >
               opts.newline_time_limit_ms;
  };
  while (!decoder.done() && !stopped() && !cancelled) {
    decoder.step();
    std::span<const int32_t> generated = decoder.generated();
    std::span<const TokenOrigin> origins = decoder.origins();
    if (draft_vocab && draft_vocab->add(generated.subspan(seen))) {
      s.draft->set_vocab_subset(draft_vocab->subset());
    }
    for (; seen < generated.size() && !stopped() && !cancelled; ++seen) {
      const int32_t id = generated[seen];
      result.tokens.push_back(id);
      if (opts.decoded_counter) {
        opts.decoded_counter->store(static_cast<int32_t>(result.tokens.size()),
                                    std::memory_order_relaxed);
      }
      result.origins.push_back(origins[seen]);
      if (opts.logprobs >= 0) result.logprobs.push_back(decoder.logprobs()[seen]);
      if (is_end(id)) break;  // the end token is not text
      last_text_origin = origins[seen];
      push_text(text_stream.push(id), last_text_origin);
      timed_out = over_time();
    }
  }
  // A truncated character left at the end (its replacement character) goes with the last text
  // token, which holds at least its last bytes.
  if (!stop.stopped()) push_text(text_stream.finish(), last_text_origin);
  if (!stop.stopped() && !cancelled) emit(stop.finish());
  if (!cancelled) flush_logprobs();
  const auto t2 = Clock::now();

  if (cancelled) {
    result.finish = FinishReason::Cancelled;
  } else if (stop.stopped() || indent.stopped()) {
    result.finish = FinishReason::Stop;
    result.stop_text = stop.stopped() ? stop.matched() : "";
  } else if (timed_out) {
    result.finish = FinishReason::Length;
  } else if (decoder.stop_reason() == StopReason::StopToken) {
    result.finish = FinishReason::EndOfGeneration;
  } else if (decoder.stop_reason() == StopReason::ContextFull ||
             (decoder.stop_reason() == StopReason::MaxTokens && budget_is_context)) {
    result.finish = FinishReason::ContextFull;
  } else {
    result.finish = FinishReason::Length;
  }
  result.stats.generated_tokens = static_cast<int32_t>(result.tokens.size());
  result.stats.decode_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  result.stats.spec = decoder.stats();
  result.stats.draft_shared_tokens = s.draft_copied;
  s.history = decoder.tokens();
  if (sharing) {
    // Idle until its next request, the slot offers all its caches hold: each holds a prefix of
    // the history (the target's one token short of it: the last token is still pending).
    const int32_t n_target = std::min(static_cast<int32_t>(s.history.size()), s.target.length());
    offer_prefix(s, s.history, n_target, s.draft ? std::min(n_target, s.draft->length()) : 0);
  }
  return result;
}

GenerationResult Engine::embed(std::span<const int32_t> prompt, const EmbeddingParams& params,
                               const TextCallback& on_text, int32_t slot) {
  const auto n_prompt = static_cast<int32_t>(prompt.size());
  // Nothing is generated, so the input may fill the whole context.
  if (n_prompt > options_.n_ctx) {
    fail("the input has ", n_prompt, " tokens but the context holds ", options_.n_ctx,
         " (raise -c or shorten the input)");
  }
  check_normalization(params.normalize);  // before the read, not after it
  Sequences& s = *slots_[static_cast<size_t>(slot)];
  // Only the last row's state is pooled by Last, and it depends on the rows before it through
  // their K/V alone: a cached prefix serves. The other poolings need every row's state.
  const bool last = params.pooling == Pooling::Last;
  const int32_t limit =
      std::min({static_cast<int32_t>(s.history.size()), s.target.length(), n_prompt - 1});
  const int32_t n_cached = last ? common_prefix(s.history, prompt, limit) : 0;
  const bool sharing = coordinator_ && options_.share_prefixes;
  if (sharing) withdraw_offer(s, n_cached);
  s.history.resize(static_cast<size_t>(n_cached));
  s.target.truncate(n_cached);
  // The draft's cache must still hold only a prefix of the history recorded below.
  if (s.draft && s.draft_base > 0) {
    s.draft->truncate(0);
    s.draft_base = 0;
  }
  if (s.draft) s.draft->truncate(std::min(s.draft->length(), n_cached));

  GenerationResult result;
  result.stats.prompt_tokens = n_prompt;
  result.stats.cached_tokens = n_cached;
  const auto t0 = std::chrono::steady_clock::now();
  {
    const BatchMembership membership(coordinator_.get());
    result.embedding =
        embed_tokens(s.target, prompt, params, [&on_text] { return !on_text || on_text(""); });
  }
  result.stats.prefill_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  result.finish = result.embedding.empty() ? FinishReason::Cancelled : FinishReason::Stop;
  // The target's cache now holds the input (up to where a cancel stopped it): a later request
  // on the slot reuses that prefix.
  s.history.assign(prompt.begin(), prompt.begin() + s.target.length());
  if (sharing) {
    offer_prefix(s, s.history, s.target.length(), s.draft ? s.draft->length() : 0);
  }
  return result;
}

int32_t Engine::share_prefix(Sequences& s, std::span<const int32_t> prompt, int32_t n_cached) {
  std::unique_lock lock(share_mu_);
  const auto limit = static_cast<int32_t>(prompt.size()) - 1;
  Sequences* best = nullptr;
  int32_t best_len = n_cached;
  for (;;) {
    best = nullptr;
    best_len = n_cached;
    int32_t coming = 0;  // the longest common prefix a slot still reading will offer
    for (const auto& other : slots_) {
      // A target row is another model's at other LoRA scales.
      if (other.get() == &s || other->lora_key != s.lora_key) continue;
      const auto offered = static_cast<int32_t>(other->shared.size());
      const int32_t len = common_prefix(other->shared, prompt, std::min(limit, offered));
      if (len > best_len) {
        best = other.get();
        best_len = len;
      }
      if (other->reading) {
        const auto claimed = static_cast<int32_t>(other->claim.size());
        coming = std::max(coming, common_prefix(other->claim, prompt, std::min(limit, claimed)));
      }
    }
    // Computing those rows here would put them in the same passes a second time. Waiting costs
    // this request no time (its own rows past them need them first) and stops at a chunk short
    // of them, which this slot then reads itself. A slot that waits has not claimed anything,
    // so no two slots wait for each other.
    if (coming - best_len < options_.prefill_chunk) break;
    share_cv_.wait(lock);
  }
  s.claim.assign(prompt.begin(), prompt.begin() + limit);
  s.reading = true;
  if (best == nullptr) return n_cached;
  // The target's entries up to best_len; the draft's as far as the other's draft cache offers
  // them, from where this one's ends (it may hold less than its target).
  s.target.truncate(n_cached);
  s.target.extend_from(best->target, best_len);
  int32_t n_draft = s.shared_draft;
  if (s.draft) {
    const int32_t upto = std::min(best_len, best->shared_draft);
    s.draft->truncate(std::min(s.draft->length(), n_cached));
    if (upto > s.draft->length()) {
      s.draft_copied += upto - s.draft->length();
      s.draft->extend_from(*best->draft, upto);
    }
    n_draft = std::min(s.draft->length(), best_len);
  }
  s.history.assign(prompt.begin(), prompt.begin() + best_len);
  s.shared = s.history;
  s.shared_draft = n_draft;
  return best_len;
}

void Engine::withdraw_offer(Sequences& s, int32_t n_cached) {
  std::lock_guard lock(share_mu_);
  s.shared.resize(std::min(s.shared.size(), static_cast<size_t>(n_cached)));
  s.shared_draft = std::min({s.shared_draft, n_cached, s.draft ? s.draft->length() : 0});
}

void Engine::offer_read_rows(Sequences& s, std::span<const int32_t> prompt) {
  // The prompt's rows (all but its last token's) are final once computed: rollbacks never go
  // behind them. Both caches hold a prefix of the prompt while the slot reads it.
  const auto limit = static_cast<int32_t>(prompt.size()) - 1;
  const int32_t n_target = std::min(s.target.length(), limit);
  std::lock_guard lock(share_mu_);
  if (n_target > static_cast<int32_t>(s.shared.size())) {
    s.shared.insert(s.shared.end(), prompt.begin() + static_cast<ptrdiff_t>(s.shared.size()),
                    prompt.begin() + n_target);
    share_cv_.notify_all();
  }
  // The draft may read before its target (a seeded sampled request's does): shared_draft may
  // then run ahead of shared, and whoever copies takes no more than both.
  if (s.draft) {
    s.shared_draft = std::max(s.shared_draft, std::min(s.draft->length(), limit));
    if (s.draft->length() >= limit) s.draft_reading = false;
  }
}

std::pair<Engine::Sequences*, int32_t> Engine::draft_source(const Sequences& s,
                                                            std::span<const int32_t> prompt,
                                                            int32_t have, int32_t want) const {
  Sequences* best = nullptr;
  int32_t best_len = have;
  for (const auto& other : slots_) {
    if (other.get() == &s || other->draft == nullptr) continue;
    const int32_t offered =
        std::min({want, other->shared_draft, static_cast<int32_t>(other->shared.size())});
    if (offered <= best_len) continue;
    const int32_t len = common_prefix(other->shared, prompt, offered);
    if (len > best_len) {
      best = other.get();
      best_len = len;
    }
  }
  return {best, best_len};
}

void Engine::copy_draft_rows(Sequences& s, std::span<const int32_t> prompt, int32_t max) {
  const auto limit = static_cast<int32_t>(prompt.size()) - 1;
  const int32_t have = s.draft->length();
  const int32_t want = std::min(limit, have + max);
  if (want <= have) return;
  std::lock_guard lock(share_mu_);
  const auto [best, best_len] = draft_source(s, prompt, have, want);
  if (best == nullptr) return;
  s.draft_copied += best_len - have;
  s.draft->extend_from(*best->draft, best_len);
  s.shared_draft = std::max(s.shared_draft, std::min(best_len, limit));
  if (best_len >= limit) s.draft_reading = false;
}

bool Engine::other_draft_reading(const Sequences& s, std::span<const int32_t> prompt,
                                 int32_t available) const {
  const auto limit = static_cast<int32_t>(prompt.size()) - 1;
  for (const auto& other : slots_) {
    if (other.get() == &s || !other->draft_reading) continue;
    const auto claimed = static_cast<int32_t>(other->claim.size());
    const int32_t len = common_prefix(other->claim, prompt, std::min(limit, claimed));
    if (len - available >= options_.prefill_chunk) return true;
  }
  return false;
}

bool Engine::claim_draft_read(Sequences& s, std::span<const int32_t> prompt, int32_t held) {
  const auto limit = static_cast<int32_t>(prompt.size()) - 1;
  std::lock_guard lock(share_mu_);
  const int32_t available = draft_source(s, prompt, held, limit).second;
  if (other_draft_reading(s, prompt, available)) return false;
  s.draft_reading = held < limit;
  return true;
}

void Engine::stop_reading(Sequences& s) {
  std::lock_guard lock(share_mu_);
  s.draft_reading = false;
  s.claim.clear();
  if (!s.reading) return;
  s.reading = false;
  share_cv_.notify_all();
}

void Engine::offer_prefix(Sequences& s, std::span<const int32_t> tokens, int32_t n_target,
                          int32_t n_draft) {
  std::lock_guard lock(share_mu_);
  s.shared.assign(tokens.begin(), tokens.begin() + n_target);
  s.shared_draft = std::min(n_draft, n_target);
  s.reading = false;
  share_cv_.notify_all();
}

}  // namespace specdec
