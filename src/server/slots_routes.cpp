// POST /slots/{id}?action=save|restore|erase (llama-server's slot actions; server/slot_actions.h).
// The action runs on the HTTP thread once the slot's running job (if any) has ended, while the
// queue hands no new job to that slot (GenerationQueue::with_idle_slot), so the engine's caches
// for the slot are the action's alone; the other slots go on generating meanwhile.
#include <chrono>
#include <filesystem>

#include "common/error.h"
#include "server/http_server_impl.h"

namespace specdec::server {

void HttpServer::Impl::slot_action(const HttpRequest& req, HttpResponder& res) {
  Engine& e = ready_engine();
  if (draining.load()) throw shutting_down_error();
  const SlotActionRequest r =
      parse_slot_action(slot_path_id(req.path).value_or(""), req.target, req.body, e.n_slots());
  if (r.action != SlotAction::Erase && config.slot_save_path.empty()) {
    throw ApiError(501,
                   "This server does not support slots action. Start it with `--slot-save-path`",
                   "not_supported_error", "", "not_implemented");
  }
  const std::string file = (std::filesystem::path(config.slot_save_path) / r.filename).string();
  nlohmann::json out;
  std::optional<ApiError> failed;
  const bool ran = queue->with_idle_slot(r.slot, [&] {
    // The action's own time, not the wait for the slot.
    const auto start = std::chrono::steady_clock::now();
    const auto ms = [&start] {
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
          .count();
    };
    try {
      // (The stats first, then the time they took: one statement would leave the order open.)
      switch (r.action) {
        case SlotAction::Save: {
          const Engine::SlotFileStats saved = e.save_slot(r.slot, file);
          out = slot_saved_json(r, saved, ms());
          break;
        }
        case SlotAction::Restore: {
          const Engine::SlotFileStats restored = e.restore_slot(r.slot, file);
          out = slot_restored_json(r, restored, ms());
          break;
        }
        case SlotAction::Erase:
          out = slot_erased_json(r, e.erase_slot(r.slot));
          break;
      }
    } catch (const Error& err) {
      // A file that is not there or does not fit is the request's fault; a save that cannot
      // write is the server's.
      failed = r.action == SlotAction::Restore
                   ? invalid_request(err.what(), "filename")
                   : ApiError(500, err.what(), "server_error", "", "slot_save_failed");
    }
  });
  if (!ran) throw shutting_down_error();
  if (failed) throw *failed;
  res.send(200, "application/json", to_wire(out));
}

}  // namespace specdec::server
