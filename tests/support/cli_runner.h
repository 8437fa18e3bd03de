// Runs the specdec CLI as a user would (a real process) and captures its exit code, stdout and
// stderr, for the end-to-end tests.
#pragma once

#include <string>
#include <vector>

namespace specdec::testing {

struct CliResult {
  int exit_code = -1;  // 128 + signal number when the process was killed by a signal
  std::string out, err;
};

// The CLI is $SPECDEC_CLI if set, else `specdec` beside the running test binary (CMake puts both
// in the build directory).
std::string cli_path();
CliResult run_cli(const std::vector<std::string>& args);
// The same with extra environment variables, each "NAME=value".
CliResult run_cli_env(const std::vector<std::string>& env, const std::vector<std::string>& args);
std::string read_file(const std::string& path);

}  // namespace specdec::testing
