// What every model-running command does the same way: how -t and -md are resolved.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/loaded_model.h"

namespace specdec::cli {

// The -t value, or every core of the machine when it was not given (0).
int thread_count(int32_t requested);

// The -md model, or nullptr when no draft was given (empty path).
std::unique_ptr<LoadedModel> load_draft(const std::string& path);

}  // namespace specdec::cli
