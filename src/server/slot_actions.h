// llama-server's slot actions, POST /slots/{id}?action=save|restore|erase: saving a slot's
// cached text with its K/V entries to a file in the --slot-save-path directory, restoring it
// (into any slot, in this or a later server on the same models), and forgetting it. What is
// checked before the engine is asked (Engine::save_slot and friends do the rest) and the
// response shapes, in llama-server's words and fields.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "engine/engine.h"

namespace specdec::server {

enum class SlotAction { Save, Restore, Erase };

struct SlotActionRequest {
  int32_t slot = 0;
  SlotAction action = SlotAction::Erase;
  std::string filename;  // save and restore: checked by valid_slot_filename
};

// The slot number from "/slots/{id}", or nullopt when the path is not of that form.
std::optional<std::string_view> slot_path_id(std::string_view path);

// Parses and checks a request (400 ApiErrors in llama-server's words: "Invalid slot ID",
// "Invalid action", "Invalid filename"). n_slots bounds the slot number.
SlotActionRequest parse_slot_action(std::string_view id, std::string_view target,
                                    std::string_view body, int32_t n_slots);

// A name for a file inside the save directory and nothing else: 1-255 bytes of valid UTF-8, no
// control characters, no path separator or character some file system refuses (\ / : * ? " < >
// |), no leading or trailing space, not starting or ending with a dot (no "..", no hidden or
// temporary files of ours).
bool valid_slot_filename(std::string_view name);

nlohmann::json slot_saved_json(const SlotActionRequest& r, const Engine::SlotFileStats& s,
                               double ms);
nlohmann::json slot_restored_json(const SlotActionRequest& r, const Engine::SlotFileStats& s,
                                  double ms);
nlohmann::json slot_erased_json(const SlotActionRequest& r, int32_t n_erased);

}  // namespace specdec::server
