// Where the tests find real GGUF models (fetched by scripts/fetch-models.sh) and fixtures.
#pragma once

#include <optional>
#include <string>

namespace specdec::testing {

// The path of a cached real model file (e.g. "SmolLM2-135M-Instruct.Q4_1.gguf"), looked up in
// $SPECDEC_MODELS or ~/.cache/specdec/models; nullopt when absent.
std::optional<std::string> find_real_model(const std::string& file_name);

// Like find_real_model, but in CI (CI=true, where scripts/test.sh fetches every model first) a
// missing model is a failure, not a skip: a test that silently skips there checks nothing.
// Outside CI, returns nullopt and the caller skips with the message from missing_model_message.
std::optional<std::string> require_real_model(const std::string& file_name);
std::string missing_model_message(const std::string& file_name);

// $SPECDEC_SOURCE_DIR/tests/fixtures/<name> (set by CTest), or a path relative to the source
// tree found from the current directory.
std::string fixture_path(const std::string& name);

}  // namespace specdec::testing
