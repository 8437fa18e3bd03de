#include <cstdio>
#include <exception>
#include <iostream>
#include <new>

#include "cli/commands.h"
#include "common/error.h"
#include "tensor/cpu_features.h"

namespace specdec::cli {
namespace {

constexpr const char* kUsage =
    "usage: specdec <command> [options]\n"
    "\n"
    "commands:\n"
    "  run     generate text from a prompt (speculative with -md DRAFT)\n"
    "  info    print a model's architecture, sizes, tensor types and tokenizer\n"
    "  models  list the GGUF models on this machine (Ollama's, Hugging Face's, specdec's) and\n"
    "          the draft/target pairs among them\n"
    "  verify  check on your models that speculation leaves the output distribution unchanged\n"
    "  make-draft  write a draft made of a target's first N layers (self-speculation)\n"
    "  serve   OpenAI-compatible HTTP server (speculative with -md DRAFT)\n"
    "  chat    interactive chat in the terminal (reads lines from stdin)\n"
    "  bench   speculative vs target-only speed and acceptance over gammas, prompts, temperatures\n"
    "  verify-cost  cost of a verify pass over k tokens vs one decode step; decode bandwidth\n"
    "  perplexity  a model's perplexity over a text file, computed as llama-perplexity does\n"
    "  embed   text embeddings (the model's pooled hidden states), as llama-embedding prints\n"
    "\n"
    "'specdec <command> --help' documents every option of a command.\n";

}  // namespace

int main_entry(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    std::cout << kUsage;
    return args.empty() ? 1 : 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  // Settle whether AMX tiles run here now, while the process is small: the check runs a tile
  // multiply in a forked child (cpu_features.cpp), and a fork after the models are mapped and
  // packed copies the page tables of gigabytes and, under strict overcommit
  // (vm.overcommit_memory = 2), may fail, which would turn the tile kernels off for the run.
  (void)cpu_has_amx_int8();
  try {
    if (command == "run") return run_command(args);
    if (command == "info") return info_command(args);
    if (command == "models") return models_command(args);
    if (command == "verify") return verify_command(args);
    if (command == "make-draft") return make_draft_command(args);
    if (command == "serve") return serve_command(args);
    if (command == "chat") return chat_command(args);
    if (command == "bench") return bench_command(args);
    if (command == "verify-cost") return verify_cost_command(args);
    if (command == "perplexity") return perplexity_command(args);
    if (command == "embed") return embed_command(args);
    std::cerr << "error: unknown command '" << command << "'\n\n" << kUsage;
    return 1;
  } catch (const Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: internal: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace specdec::cli
