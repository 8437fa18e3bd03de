#include "server/lora_api.h"

#include <cmath>

#include "server/json_fields.h"

namespace specdec::server {

nlohmann::json lora_adapters_json(std::span<const ActiveLora> adapters,
                                  std::span<const float> scales) {
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < adapters.size(); ++i) {
    list.push_back({{"id", i}, {"path", adapters[i].adapter->path}, {"scale", scales[i]}});
  }
  return list;
}

std::vector<LoraRequestEntry> parse_lora_entries(const nlohmann::json& v,
                                                 const std::string& param) {
  if (!v.is_array()) wrong_type(param, "an array of {\"id\", \"scale\"} objects", v);
  std::vector<LoraRequestEntry> entries;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = str_cat(param, "[", i, "]");
    const nlohmann::json& e = require_object(v[i], at);
    const nlohmann::json* id = field(e, "id");
    const nlohmann::json* scale = field(e, "scale");
    if (id == nullptr || !id->is_number_integer()) {
      bad_field(at + ".id", "must be an adapter's integer id", "invalid_type");
    }
    if (scale == nullptr || !scale->is_number() || !std::isfinite(scale->get<double>())) {
      bad_field(at + ".scale", "must be a finite number", "invalid_type");
    }
    entries.push_back({id->get<int64_t>(), scale->get<double>()});
  }
  return entries;
}

std::vector<float> lora_scales_of(std::span<const LoraRequestEntry> entries, size_t n_adapters,
                                  const std::string& param) {
  std::vector<float> scales(n_adapters, 0.0f);
  for (size_t i = 0; i < entries.size(); ++i) {
    const LoraRequestEntry& e = entries[i];
    if (e.id < 0 || e.id >= static_cast<int64_t>(n_adapters)) {
      bad_field(str_cat(param, "[", i, "].id"),
                str_cat("names no adapter: this server runs ", n_adapters,
                        " LoRA adapters (--lora, --lora-scaled; GET /lora-adapters lists them)"));
    }
    const auto scale = static_cast<float>(e.scale);
    if (!std::isfinite(scale)) {
      bad_field(str_cat(param, "[", i, "].scale"), "is out of a float's range", "invalid_value");
    }
    scales[static_cast<size_t>(e.id)] = scale;
  }
  return scales;
}

}  // namespace specdec::server
