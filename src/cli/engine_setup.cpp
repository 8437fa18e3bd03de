#include "cli/engine_setup.h"

#include <algorithm>
#include <thread>

namespace specdec::cli {

int thread_count(int32_t requested) {
  if (requested > 0) return requested;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::unique_ptr<LoadedModel> load_draft(const std::string& path) {
  if (path.empty()) return nullptr;
  return std::make_unique<LoadedModel>(LoadedModel::load(path));
}

}  // namespace specdec::cli
