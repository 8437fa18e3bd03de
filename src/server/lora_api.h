// llama-server's LoRA surface over the adapters the target was started with (`--lora`,
// `--lora-scaled`): GET /lora-adapters lists them, and a request's `lora` list (and POST
// /lora-adapters) may name them at the scales they run at. The scales are fixed at startup: a
// K/V cache, a shared prompt prefix or a slot file computed under one set of scales would be
// another model's under another, so a request for other scales is a 400 naming the field,
// never silently served at the startup scales.
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

// [{"id", "path", "scale"}, ...], in the order they were given (llama-server's shape).
nlohmann::json lora_adapters_json(std::span<const ActiveLora> adapters);

// An array of {"id": integer, "scale": number}: its entries, or a 400 naming `param`
// ("lora[1].scale", ...).
std::vector<LoraRequestEntry> parse_lora_entries(const nlohmann::json& v, const std::string& param);

// A 400 naming `param` unless every entry names one of the adapters (by id) at the scale it
// runs at. (llama-server leaves the adapters a list does not name at their server scale.)
void check_lora_entries(std::span<const LoraRequestEntry> entries,
                        std::span<const ActiveLora> adapters, const std::string& param);

}  // namespace specdec::server
