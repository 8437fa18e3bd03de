// Mirostat (Basu et al., "Mirostat: a neural text decoding algorithm that directly controls
// perplexity", ICLR 2021), as llama.cpp samples it (--mirostat 1 or 2).
//
// Mirostat keeps one number per sequence, mu, a cap on the surprise (-log2 p) of the tokens it
// may sample. A row's distribution is softmax(logits / T) truncated by mu and renormalized; after
// a token x is sampled from it, mu moves towards the target surprise tau:
//   mu' = mu - eta * (-log2 p(x) - tau),   p the truncated, renormalized distribution; mu0 = 2 tau.
// Version 2 keeps the tokens whose own surprise is at most mu (at least the most likely one).
// Version 1 estimates the Zipf exponent s of the 100 most likely tokens and keeps the top k,
//   k = (eps * 2^mu / (1 - N^-eps))^(1/s),  eps = s - 1,  N the vocabulary size.
// Every other filter (top-k, top-p, min-p, typical, top-n-sigma, XTC, dynamic temperature) is
// off under Mirostat, as in llama.cpp.
//
// A row's distribution is a function of its logits and mu, and mu of the tokens before it, so
// under speculation the target's row j is built at the mu that drafts y_1..y_j leave (it is only
// used when they were all accepted) and the output stays exactly Mirostat's.
#pragma once

#include <span>

#include "sampling/distribution.h"

namespace specdec {

// How Mirostat cuts one row: the plain filters (temperature T, a top-k for version 1, nothing
// else; mirostat off) and, for version 2, a probability floor 2^-mu: the tokens whose
// probability in softmax(logits / T) is below it are dropped (the most likely one never is).
// make_distribution applies both. params.mirostat must be 1 or 2; mu is params.mirostat_mu
// (NaN: 2 tau). Logits without a finite maximum are for make_distribution to refuse (version 1
// then comes back without a top-k).
struct MirostatCut {
  SamplingParams filters;
  double prob_floor = 0.0;
};
MirostatCut mirostat_cut(std::span<const float> logits, const SamplingParams& params);

// mu for the next row after a token that had probability token_prob (> 0) in this row's
// distribution, sampled at params.mirostat_mu (NaN: 2 tau).
float mirostat_next_mu(const SamplingParams& params, float token_prob);

// params.mirostat_mu, or 2 tau at the start of a sequence (NaN).
float mirostat_mu_of(const SamplingParams& params);

}  // namespace specdec
