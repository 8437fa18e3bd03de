// Repetition, presence and frequency penalties and logit bias: the request-level logit
// adjustments of the OpenAI API (presence_penalty, frequency_penalty, logit_bias), vLLM and
// Hugging Face (repetition_penalty) and llama.cpp (--repeat-penalty, --presence-penalty,
// --frequency-penalty).
//
// They make the target's next-token distribution depend on the text so far, which speculative
// decoding handles exactly: the verify pass's row j predicts the token after the committed text
// and drafts y_1..y_j, so its penalties count those drafts as generated (apply()'s `extra`), and
// the draft applies the same adjustment to its own q (not needed for exactness, which holds for
// any q, but without it q would not resemble p and few drafts would pass).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sampling/dry.h"

namespace specdec {

struct PenaltyParams {
  // > 1 discourages every token of the prompt or of the text generated so far: a positive logit
  // is divided by it, a negative one multiplied (Hugging Face's and vLLM's repetition_penalty).
  // 1 disables.
  float repetition_penalty = 1.0f;
  // Subtracted from the logit of every token generated so far (OpenAI presence_penalty); the
  // prompt does not count, as in OpenAI's API and vLLM. 0 disables.
  float presence_penalty = 0.0f;
  // Subtracted once per time a token was generated so far (OpenAI frequency_penalty). 0 disables.
  float frequency_penalty = 0.0f;
  // Added to the logits of these token ids (OpenAI logit_bias: -100 bans a token, 100 forces it).
  std::vector<std::pair<int32_t, float>> logit_bias;
  // vLLM's min_tokens: while fewer than min_tokens tokens were generated, the tokens of
  // min_tokens_ids (those that would end the text: end of generation, stop_token_ids) cannot be
  // sampled (their logits become -inf). 0 disables.
  int32_t min_tokens = 0;
  std::vector<int32_t> min_tokens_ids;
  // DRY over the prompt and the text so far, applied after the others (llama.cpp's order), with
  // its breakers as token sequences of the vocabulary (dry_breakers; filled by the engine).
  DryParams dry;
  std::vector<DryBreaker> dry_breakers;
  // Which tokens the three penalties above count. -1 (the default): OpenAI's and vLLM's rule, the
  // repetition penalty over the prompt and the text, presence and frequency over the generated
  // text. >= 0: llama.cpp's rule (its repeat_last_n): all three count the last `last_n` tokens
  // of the prompt and the text together; 0 turns them off; a window longer than the text covers
  // all of it (llama.cpp's -1 is kWholeText).
  int32_t last_n = -1;
  static constexpr int32_t kWholeText = 1 << 30;

  // The three penalties, as last_n leaves them.
  bool penalties_active() const {
    return last_n != 0 &&
           (repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f);
  }
  // The adjustments that count tokens (all but DRY).
  bool counts_active() const {
    return penalties_active() || !logit_bias.empty() || (min_tokens > 0 && !min_tokens_ids.empty());
  }
  bool active() const { return counts_active() || dry.active(); }
};

// The ranges accepted (the OpenAI API's for presence, frequency and bias). Throws
// specdec::Error naming the parameter otherwise; n_vocab bounds logit_bias's ids.
void check_penalty_params(const PenaltyParams& params, int32_t n_vocab);

// The adjustment for one sequence: which tokens the prompt holds and how often each was
// generated. Per logit row the work is proportional to the distinct tokens seen, not to the
// vocabulary (with a draft's vocabulary subset, to the subset's width).
class TokenPenalties {
 public:
  // Throws specdec::Error when params are out of range (check_penalty_params).
  TokenPenalties(const PenaltyParams& params, int32_t n_vocab);

  // A new sequence with this prompt and nothing generated.
  void reset(std::span<const int32_t> prompt);
  // One more generated token.
  void add(int32_t token);

  // Adjusts logits in place as if `extra` had been generated after the tokens added so far (a
  // round's drafts before the row's position); min_tokens counts them too. Without ids, logits[t]
  // is token t's logit; with ids, logits[j] is token ids[j]'s (a draft's vocabulary subset). Every
  // adjusted logit gets each adjustment once, in the order bias, repetition, frequency and
  // presence, so that the result is a function of the logit and the counts alone (the same bits for
  // the target's full row and for any caller); then DRY's penalty over the prompt, the tokens added
  // and `extra`.
  void apply(std::span<float> logits, std::span<const int32_t> extra,
             std::span<const int32_t> ids = {}) const;

  const PenaltyParams& params() const { return params_; }

 private:
  float adjusted(float logit, int32_t token, int32_t generated) const;
  // llama.cpp's rule: `count` occurrences in the window.
  float adjusted_in_window(float logit, int32_t token, int32_t count) const;
  void apply_window(std::span<float> logits, std::span<const int32_t> extra,
                    std::span<const int32_t> ids) const;
  bool windowed() const { return params_.last_n >= 0; }
  // min_tokens: whether the ending tokens are held back on a row after `drafted` drafts.
  bool holds_back(size_t drafted) const;
  // The last n tokens of the prompt, the tokens added and `extra` (fewer when there are fewer),
  // in a buffer of this thread's that the next call reuses.
  std::span<const int32_t> last_tokens(std::span<const int32_t> extra, int32_t n) const;
  bool keeps_history() const { return params_.dry.active() || windowed(); }
  void apply_counts(std::span<float> logits, std::span<const int32_t> extra,
                    std::span<const int32_t> ids) const;
  void apply_dry(std::span<float> logits, std::span<const int32_t> extra,
                 std::span<const int32_t> ids) const;
  void list(int32_t token);

  PenaltyParams params_;
  int32_t n_vocab_;
  std::vector<float> bias_;         // per token id (0: none)
  std::vector<int32_t> count_;      // times generated
  std::vector<uint8_t> in_prompt_;  // in the prompt
  std::vector<uint8_t> listed_;     // in ids_
  std::vector<int32_t> ids_;        // every token with a bias, a count or a prompt occurrence
  std::vector<int32_t> bias_ids_;   // the tokens logit_bias names, kept across reset()
  std::vector<uint8_t> held_back_;  // in min_tokens_ids
  int32_t generated_ = 0;           // tokens added since reset()
  std::vector<int32_t> history_;    // with DRY or a window: the prompt and the tokens added
};

}  // namespace specdec
