#include "server/slot_actions.h"

#include <charconv>

#include "server/api_error.h"
#include "server/http_request_parser.h"
#include "server/request_parsing.h"

namespace specdec::server {

using nlohmann::json;

std::optional<std::string_view> slot_path_id(std::string_view path) {
  constexpr std::string_view kPrefix = "/slots/";
  if (!path.starts_with(kPrefix) || path.size() == kPrefix.size()) return std::nullopt;
  return path.substr(kPrefix.size());
}

bool valid_slot_filename(std::string_view name) {
  if (name.empty() || name.size() > 255) return false;
  if (name.front() == ' ' || name.back() == ' ' || name.front() == '.' || name.back() == '.') {
    return false;
  }
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) return false;
    if (std::string_view("\\/:*?\"<>|").find(ch) != std::string_view::npos) return false;
  }
  return true;
}

SlotActionRequest parse_slot_action(std::string_view id, std::string_view target,
                                    std::string_view body, int32_t n_slots) {
  SlotActionRequest r;
  const auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), r.slot);
  if (ec != std::errc() || end != id.data() + id.size() || r.slot < 0 || r.slot >= n_slots) {
    throw invalid_request("Invalid slot ID");
  }
  const std::optional<std::string> action = query_value(target, "action");
  if (action == "save") {
    r.action = SlotAction::Save;
  } else if (action == "restore") {
    r.action = SlotAction::Restore;
  } else if (action == "erase") {
    r.action = SlotAction::Erase;
    return r;
  } else {
    throw invalid_request("Invalid action", "action");
  }
  // The JSON parser has already refused a name that is not valid UTF-8.
  const json doc = parse_body(body);
  const auto it = doc.find("filename");
  if (it == doc.end() || !it->is_string()) {
    throw invalid_request("\"filename\" is required (a string)", "filename");
  }
  r.filename = it->get<std::string>();
  if (!valid_slot_filename(r.filename)) throw invalid_request("Invalid filename", "filename");
  return r;
}

json slot_saved_json(const SlotActionRequest& r, const Engine::SlotFileStats& s, double ms) {
  return {{"id_slot", r.slot},    {"filename", r.filename},
          {"n_saved", s.tokens},  {"n_saved_draft", s.draft_tokens},
          {"n_written", s.bytes}, {"timings", {{"save_ms", ms}}}};
}

json slot_restored_json(const SlotActionRequest& r, const Engine::SlotFileStats& s, double ms) {
  return {{"id_slot", r.slot},      {"filename", r.filename},
          {"n_restored", s.tokens}, {"n_restored_draft", s.draft_tokens},
          {"n_read", s.bytes},      {"timings", {{"restore_ms", ms}}}};
}

json slot_erased_json(const SlotActionRequest& r, int32_t n_erased) {
  return {{"id_slot", r.slot}, {"n_erased", n_erased}};
}

}  // namespace specdec::server
