// llama.cpp's sampler chain as a named sequence (llama-server's `samplers`, given as names or as
// a string of one-letter codes), applied to the parameters make_distribution and the penalties
// take.
//
// The engine's own order is llama.cpp's default: penalties, dry, top_n_sigma, top_k, typ_p,
// top_p, min_p, xtc, temperature. A sequence may leave stages out (they are switched off, as in
// llama.cpp) and may put the temperature first or last (SamplingParams::temperature_last); any
// other order that would change the distribution is refused with an Error naming the two stages,
// never silently applied in the default order.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sampling/distribution.h"
#include "sampling/penalties.h"

namespace specdec {

// llama.cpp's default sequence, by the canonical names below.
const std::vector<std::string>& default_sampler_sequence();

// The canonical name of a stage for any name llama-server takes for it (top-k, nucleus,
// typical_p, temp, ...); "" for names of stages specdec does not have (infill, tfs_z, ...).
std::string canonical_sampler_name(std::string_view name);

// The canonical names of llama-server's one-letter codes (d k y p s m t x e), in order; letters
// of stages specdec does not have are skipped.
std::vector<std::string> sampler_names_of_letters(std::string_view letters);

// Applies a sequence of canonical names (empty names are skipped, a repeated stage counts where
// it first appears): a stage it leaves out is switched off (the temperature then 1, unless
// Mirostat is on: llama.cpp samples at the temperature under it); where the temperature stands
// sets params.temperature_last. Returns the stages that act, in the sequence's order. Throws
// Error for an order the engine does not apply: two acting stages out of the default order, the
// temperature between two of the filters that measure probabilities (typ_p, top_p, min_p, xtc),
// or the temperature before presence/frequency penalties or DRY, which subtract from the logits.
std::vector<std::string> apply_sampler_sequence(const std::vector<std::string>& sequence,
                                                SamplingParams& params, PenaltyParams& penalties);

}  // namespace specdec
