#include "support/cli_runner.h"

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/tiny_model.h"

namespace specdec::testing {
namespace {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  q += '\'';
  return q;
}

}  // namespace

std::string cli_path() {
  if (const char* env = std::getenv("SPECDEC_CLI"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) return (self.parent_path() / "specdec").string();
  return "build/specdec";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

CliResult run_cli(const std::vector<std::string>& args) { return run_cli_env({}, args); }

CliResult run_cli_env(const std::vector<std::string>& env, const std::vector<std::string>& args) {
  std::string cmd;
  if (!env.empty()) {
    cmd = "env";
    for (const auto& e : env) cmd += ' ' + shell_quote(e);
    cmd += ' ';
  }
  cmd += shell_quote(cli_path());
  for (const auto& a : args) {
    cmd += ' ';
    cmd += shell_quote(a);
  }
  const std::string out = temp_path("cli_out.txt"), err = temp_path("cli_err.txt");
  cmd += " >" + shell_quote(out) + " 2>" + shell_quote(err) + " </dev/null";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

}  // namespace specdec::testing
