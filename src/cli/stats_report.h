// How a run's timings and speculative statistics are shown: a short human summary for stderr
// and a JSON document (--stats-json) with every counter and the per-round log.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/engine.h"
#include "engine/loaded_model.h"

namespace specdec::cli {

// Mean of sum_x min(p, q) over every drafted position the verifier tested: the acceptance rate
// the rule should produce in expectation, to set beside the measured one.
double mean_overlap(const DecodeStats& stats);

// "92.1 MiB": bytes in the largest binary unit that keeps the number at or above 1.
std::string human_bytes(double bytes);

std::string format_summary(const GenerationResult& result, double load_ms, uint64_t seed,
                           int n_threads);
nlohmann::json stats_to_json(const GenerationResult& result, const GenerationOptions& options,
                             int n_threads);

}  // namespace specdec::cli
