// The specdec subcommands. Each takes the arguments after its name and returns the process
// exit code; specdec::Error escapes to main(), which prints it on one line and exits 1.
#pragma once

#include <string>
#include <vector>

namespace specdec::cli {

int run_command(const std::vector<std::string>& args);
int info_command(const std::vector<std::string>& args);
int models_command(const std::vector<std::string>& args);
int verify_command(const std::vector<std::string>& args);
int make_draft_command(const std::vector<std::string>& args);
int serve_command(const std::vector<std::string>& args);
int chat_command(const std::vector<std::string>& args);
int bench_command(const std::vector<std::string>& args);
int verify_cost_command(const std::vector<std::string>& args);
int perplexity_command(const std::vector<std::string>& args);
int embed_command(const std::vector<std::string>& args);

// Dispatches argv to a subcommand; prints errors and usage.
int main_entry(int argc, char** argv);

}  // namespace specdec::cli
