#include "support/real_models.h"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace specdec::testing {
namespace fs = std::filesystem;

std::optional<std::string> find_real_model(const std::string& file_name) {
  std::string dir;
  if (const char* env = std::getenv("SPECDEC_MODELS"); env != nullptr && *env != '\0') {
    dir = env;
  } else if (const char* home = std::getenv("HOME"); home != nullptr) {
    dir = std::string(home) + "/.cache/specdec/models";
  }
  fs::path path = fs::path(dir) / file_name;
  std::error_code ec;
  if (!dir.empty() && fs::is_regular_file(path, ec)) return path.string();
  return std::nullopt;
}

std::string missing_model_message(const std::string& file_name) {
  return file_name + " is not in the model cache; run scripts/fetch-models.sh first";
}

std::optional<std::string> require_real_model(const std::string& file_name) {
  auto path = find_real_model(file_name);
  const char* ci = std::getenv("CI");
  if (!path && ci != nullptr && std::string(ci) == "true") {
    throw std::runtime_error("CI=true but " + missing_model_message(file_name));
  }
  return path;
}

std::string fixture_path(const std::string& name) {
  if (const char* src = std::getenv("SPECDEC_SOURCE_DIR"); src != nullptr && *src != '\0') {
    return (fs::path(src) / "tests" / "fixtures" / name).string();
  }
  for (fs::path dir = fs::current_path(); !dir.empty(); dir = dir.parent_path()) {
    fs::path candidate = dir / "tests" / "fixtures" / name;
    if (fs::exists(candidate)) return candidate.string();
    if (dir == dir.parent_path()) break;
  }
  return (fs::path("tests") / "fixtures" / name).string();
}

}  // namespace specdec::testing
