#include "server/lora_api.h"

#include <cmath>

#include "server/json_fields.h"

namespace specdec::server {

nlohmann::json lora_adapters_json(std::span<const ActiveLora> adapters) {
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < adapters.size(); ++i) {
    list.push_back({{"id", i}, {"path", adapters[i].adapter->path}, {"scale", adapters[i].scale}});
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

void check_lora_entries(std::span<const LoraRequestEntry> entries,
                        std::span<const ActiveLora> adapters, const std::string& param) {
  for (size_t i = 0; i < entries.size(); ++i) {
    const LoraRequestEntry& e = entries[i];
    const std::string at = str_cat(param, "[", i, "]");
    if (e.id < 0 || e.id >= static_cast<int64_t>(adapters.size())) {
      bad_field(at + ".id",
                str_cat("names no adapter: this server runs ", adapters.size(),
                        " LoRA adapters (--lora, --lora-scaled; GET /lora-adapters lists them)"));
    }
    const float running = adapters[static_cast<size_t>(e.id)].scale;
    if (static_cast<float>(e.scale) != running) {
      bad_field(at + ".scale",
                str_cat("asks for scale ", e.scale, "; adapter ", e.id, " runs at ", running,
                        ", fixed when the server starts (--lora-scaled FILE:SCALE): a cache "
                        "computed at one scale is another model's at another"),
                "unsupported_value");
    }
  }
}

}  // namespace specdec::server
