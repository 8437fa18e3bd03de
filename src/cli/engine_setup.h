// What every model-running command does the same way: how -t and -md are resolved, and the
// prompt-lookup (--draft-ngram) options.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cli/arg_parser.h"
#include "engine/loaded_model.h"
#include "speculative/drafter.h"
#include "speculative/ngram_drafter.h"

namespace specdec::cli {

// The -t value, or every core of the machine when it was not given (0).
int thread_count(int32_t requested);

// Tokens a draft model proposes per round (gamma) unless --draft-max says otherwise: the best
// gamma measured on the Qwen2.5-Coder pair (docs/benchmarks.md).
inline constexpr int32_t kDefaultDraftMax = 5;

// --draft-vocab N: the draft model scores only the N most frequent tokens plus the control
// tokens (FR-Spec, engine/draft_vocab.h); 0 scores the whole vocabulary. Lossless either way.
// Off by default until a size is measured to pay (docs/benchmarks.md).
inline constexpr int32_t kDefaultDraftVocab = 0;
void add_draft_vocab_option(ArgParser& p, int32_t& draft_vocab);

// --draft-policy fixed|adaptive, --draft-cost C, --draft-verify-cost V: how many tokens a draft
// model proposes per round (speculative/drafter.h, DraftLengthParams); --draft-max is the cap.
// Defaults: measured on the Qwen2.5-Coder pair (docs/benchmarks.md).
DraftLengthParams default_draft_length();
void add_draft_length_options(ArgParser& p, DraftLengthParams& params);

// --draft-hybrid: with -md, a round takes prompt lookup's drafts (the --ngram-* settings) when
// the lookup proposes at least 2 tokens, the model's otherwise (speculative/hybrid_drafter.h).
void add_hybrid_option(ArgParser& p, bool& hybrid);
// After parsing: --draft-hybrid needs a draft model.
void check_hybrid_option(bool hybrid, bool has_draft_model);

// The -md model, or nullptr when no draft was given (empty path).
std::unique_ptr<LoadedModel> load_draft(const std::string& path);

// --ngram-max, --ngram-min, --ngram-policy, --ngram-verify-cost and --ngram-adapt-rate into
// params; `given` is set when any of them appears (they only make sense with --draft-ngram).
void add_ngram_options(ArgParser& p, NgramParams& params, bool& given);
// After parsing, before any model is loaded: throws specdec::Error on a bad combination.
void check_ngram_options(const NgramParams& params, bool given, bool draft_ngram);
// "n 1..3, adaptive, verify cost 0.36" / "n 1..3, fixed": how summaries describe the drafter.
std::string describe_ngram(const NgramParams& params);

}  // namespace specdec::cli
