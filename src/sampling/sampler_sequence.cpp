#include "sampling/sampler_sequence.h"

#include <algorithm>

#include "common/error.h"

namespace specdec {
namespace {

// The filters that measure probabilities: the temperature's side of them changes what they keep.
bool measures_probabilities(const std::string& stage) {
  return stage == "typ_p" || stage == "top_p" || stage == "min_p" || stage == "xtc";
}

size_t default_rank(const std::string& stage) {
  const std::vector<std::string>& order = default_sampler_sequence();
  return static_cast<size_t>(std::find(order.begin(), order.end(), stage) - order.begin());
}

}  // namespace

const std::vector<std::string>& default_sampler_sequence() {
  static const std::vector<std::string> order = {
      "penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"};
  return order;
}

std::string canonical_sampler_name(std::string_view name) {
  if (name == "top_k" || name == "top-k") return "top_k";
  if (name == "top_p" || name == "top-p" || name == "nucleus") return "top_p";
  if (name == "min_p" || name == "min-p") return "min_p";
  if (name == "typ_p" || name == "typical_p" || name == "typical-p" || name == "typical" ||
      name == "typ-p" || name == "typ") {
    return "typ_p";
  }
  if (name == "top_n_sigma" || name == "top-n-sigma") return "top_n_sigma";
  if (name == "xtc") return "xtc";
  if (name == "temperature" || name == "temp") return "temperature";
  if (name == "penalties") return "penalties";
  if (name == "dry") return "dry";
  return "";
}

std::vector<std::string> sampler_names_of_letters(std::string_view letters) {
  std::vector<std::string> names;
  for (char c : letters) {
    switch (c) {
      case 'd':
        names.emplace_back("dry");
        break;
      case 'k':
        names.emplace_back("top_k");
        break;
      case 'y':
        names.emplace_back("typ_p");
        break;
      case 'p':
        names.emplace_back("top_p");
        break;
      case 's':
        names.emplace_back("top_n_sigma");
        break;
      case 'm':
        names.emplace_back("min_p");
        break;
      case 't':
        names.emplace_back("temperature");
        break;
      case 'x':
        names.emplace_back("xtc");
        break;
      case 'e':
        names.emplace_back("penalties");
        break;
      default:
        break;  // a stage specdec does not have, skipped as llama-server skips unknown names
    }
  }
  return names;
}

std::vector<std::string> apply_sampler_sequence(const std::vector<std::string>& sequence,
                                                SamplingParams& params, PenaltyParams& penalties) {
  std::vector<std::string> listed;
  for (const std::string& s : sequence) {
    if (!s.empty() && std::find(listed.begin(), listed.end(), s) == listed.end()) {
      listed.push_back(s);
    }
  }
  const auto has = [&listed](const char* name) {
    return std::find(listed.begin(), listed.end(), name) != listed.end();
  };
  if (!has("top_k")) params.top_k = 0;
  if (!has("top_p")) params.top_p = 1.0f;
  if (!has("min_p")) params.min_p = 0.0f;
  if (!has("typ_p")) params.typical_p = 1.0f;
  if (!has("dry")) penalties.dry.multiplier = 0.0f;
  if (!has("top_n_sigma")) params.top_n_sigma = -1.0f;
  if (!has("xtc")) params.xtc_probability = 0.0f;
  // Under Mirostat llama-server samples at the temperature whatever the list says.
  if (!has("temperature") && params.temperature > 0 && params.mirostat == 0) {
    params.temperature = 1.0f;
    params.dynatemp_range = 0.0f;  // llama-server's temperature stage is where it applies
  }
  if (!has("penalties")) {
    penalties.repetition_penalty = 1.0f;
    penalties.presence_penalty = 0.0f;
    penalties.frequency_penalty = 0.0f;
  }

  std::vector<std::string> acting;
  for (const std::string& s : listed) {
    const bool acts =
        (s == "top_k" && params.top_k > 0) || (s == "top_p" && params.top_p < 1.0f) ||
        (s == "min_p" && params.min_p > 0.0f) || (s == "typ_p" && params.typical_p < 1.0f) ||
        (s == "top_n_sigma" && params.top_n_sigma > 0.0f) ||
        (s == "dry" && penalties.dry.active()) || (s == "xtc" && params.xtc_active()) ||
        (s == "temperature" && params.temperature > 0) ||
        (s == "penalties" && penalties.penalties_active());
    if (acts) acting.push_back(s);
  }
  // Under Mirostat llama.cpp's chain is the temperature and Mirostat alone: no order to keep.
  if (params.mirostat_active()) return acting;

  const auto temperature = std::find(acting.begin(), acting.end(), "temperature");
  std::string previous;  // the last acting stage other than the temperature
  for (const std::string& s : acting) {
    if (s == "temperature") continue;
    if (!previous.empty() && default_rank(s) < default_rank(previous)) {
      fail("samplers: ", s, " after ", previous,
           " is an order specdec does not apply; it applies the stages in llama.cpp's default "
           "order (penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc) and the "
           "temperature first or last");
    }
    previous = s;
  }
  params.temperature_last = false;
  if (temperature == acting.end()) return acting;
  std::string measured_before, measured_after;
  for (auto it = acting.begin(); it != acting.end(); ++it) {
    const bool additive =
        *it == "dry" || (*it == "penalties" &&
                         (penalties.presence_penalty != 0 || penalties.frequency_penalty != 0));
    if (it > temperature && additive) {
      fail("samplers: temperature before ", *it,
           " is an order specdec does not apply: presence and frequency penalties and DRY "
           "subtract from the logits before the temperature scales them");
    }
    if (measures_probabilities(*it)) {
      std::string& side = it < temperature ? measured_before : measured_after;
      if (side.empty()) side = *it;
    }
  }
  if (!measured_before.empty() && !measured_after.empty()) {
    fail("samplers: temperature between ", measured_before, " and ", measured_after,
         " is an order specdec does not apply; put it before or after all of typ_p, top_p, "
         "min_p and xtc");
  }
  params.temperature_last = measured_after.empty();
  return acting;
}

}  // namespace specdec
