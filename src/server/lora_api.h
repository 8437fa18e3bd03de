// llama-server's LoRA surface over the adapters the target was started with (`--lora`,
// `--lora-scaled`): GET /lora-adapters lists them at the scales requests run them at by default,
// POST /lora-adapters sets those scales, and a request's `lora` list sets its own. Both lists
// work as llama-server's construct_lora_list: an adapter a non-empty list leaves out runs at
// scale 0. Requests at different scales share passes (each row at its own scales) but not
// cached prompt rows (engine/engine.h, GenerationOptions::lora_scales).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "model/lora.h"

namespace specdec::server {

struct LoraRequestEntry {
  int64_t id = 0;
  double scale = 1.0;
};

// [{"id", "path", "scale"}, ...], in the order they were given (llama-server's shape), at
// `scales` (one per adapter).
nlohmann::json lora_adapters_json(std::span<const ActiveLora> adapters,
                                  std::span<const float> scales);

// An array of {"id": integer, "scale": number}: its entries, or a 400 naming `param`
// ("lora[1].scale", ...).
std::vector<LoraRequestEntry> parse_lora_entries(const nlohmann::json& v, const std::string& param);

// The scale of each of n_adapters adapters the entries ask for: the entry's for an adapter
// named (the last one naming it), 0 for the others. A 400 naming `param` for an id that names
// no adapter.
std::vector<float> lora_scales_of(std::span<const LoraRequestEntry> entries, size_t n_adapters,
                                  const std::string& param);

}  // namespace specdec::server
