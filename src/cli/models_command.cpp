// `specdec models`: the GGUF models already on this machine and the draft/target pairs among
// them (engine/model_catalog.h).
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/stats_report.h"
#include "engine/model_catalog.h"
#include "gguf/file_type.h"

namespace specdec::cli {

namespace {

std::string default_dir() {
  if (const char* d = std::getenv("SPECDEC_MODELS"); d != nullptr && *d != '\0') return d;
  const char* home = std::getenv("HOME");
  return home != nullptr ? std::string(home) + "/.cache/specdec/models" : "";
}

nlohmann::json entry_json(const CatalogEntry& e) {
  nlohmann::json j = {{"ref", e.ref},
                      {"aliases", e.aliases},
                      {"source", e.source},
                      {"file", e.file},
                      {"bytes", e.bytes},
                      {"name", e.name},
                      {"arch", e.arch},
                      {"quantization", e.quantization},
                      {"parameters", e.parameters},
                      {"n_vocab", e.n_vocab}};
  if (!e.error.empty()) j["error"] = e.error;
  return j;
}

}  // namespace

int models_command(const std::vector<std::string>& args) {
  std::vector<std::string> dirs;
  bool json = false;
  float max_ratio = 0.5f;
  ArgParser p("specdec models [--dir DIR]... [--max-ratio R] [--json]",
              "Lists the GGUF models already on this machine, and the pairs among them that can\n"
              "speculate: a draft shares the target's vocabulary exactly and has at most R of its\n"
              "parameters. Looked in: Ollama's store ($OLLAMA_MODELS, ~/.ollama/models,\n"
              "/usr/share/ollama/.ollama/models), the Hugging Face hub cache ($HF_HUB_CACHE,\n"
              "$HF_HOME/hub, ~/.cache/huggingface/hub), specdec's cache ($SPECDEC_MODELS or\n"
              "~/.cache/specdec/models) and each --dir. Every listed MODEL works as -m or -md.\n"
              "Nothing is downloaded; only metadata and vocabularies are read.");
  p.add_strings({"--dir"}, "DIR", "also list the .gguf files in DIR (and one level down)", dirs);
  p.add_float({"--max-ratio"}, "R", "largest draft size, as a fraction of the target's parameters",
              max_ratio, 0.0, 1.0);
  p.add_flag({"--json"}, "print the models and pairs as JSON", json);
  if (!p.parse(args)) {
    std::cout << p.help();
    return 0;
  }
  const std::string cache = default_dir();
  if (!cache.empty()) dirs.insert(dirs.begin(), cache);
  const std::vector<CatalogEntry> models = find_models(model_stores(), dirs);
  const std::vector<DraftPair> pairs = draft_pairs(models, max_ratio);

  if (json) {
    nlohmann::json out = {{"models", nlohmann::json::array()}, {"pairs", nlohmann::json::array()}};
    for (const CatalogEntry& e : models) out["models"].push_back(entry_json(e));
    for (const DraftPair& d : pairs) {
      out["pairs"].push_back({{"target", models[d.target].ref},
                              {"draft", models[d.draft].ref},
                              {"size_ratio", d.size_ratio}});
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  if (models.empty()) {
    std::cout << "no GGUF models found (see specdec models --help for where it looks)\n";
    return 0;
  }
  size_t width = 5;
  for (const CatalogEntry& e : models) width = std::max(width, e.ref.size());
  std::cout << std::left << std::setw(static_cast<int>(width)) << "MODEL"
            << "  ARCH      PARAMS  QUANT     SIZE       SOURCE\n";
  for (const CatalogEntry& e : models) {
    std::cout << std::left << std::setw(static_cast<int>(width)) << e.ref << "  ";
    if (!e.error.empty()) {
      std::cout << "cannot be read: " << e.error << "\n";
      continue;
    }
    std::cout << std::setw(8) << e.arch << "  " << std::setw(6)
              << gguf::parameter_size(e.parameters) << "  " << std::setw(8) << e.quantization
              << "  " << std::setw(9) << human_bytes(static_cast<double>(e.bytes)) << "  "
              << e.source;
    if (!e.aliases.empty()) {
      std::cout << " (also ";
      for (size_t i = 0; i < e.aliases.size(); ++i) std::cout << (i ? ", " : "") << e.aliases[i];
      std::cout << ")";
    }
    std::cout << "\n";
  }
  std::cout << "\n";
  if (pairs.empty()) {
    std::cout << "no draft/target pairs: no two readable models share a vocabulary with one at "
                 "most "
              << max_ratio << " of the other's size\n";
    return 0;
  }
  std::cout << "draft/target pairs (same vocabulary; draft parameters as a share of the "
               "target's):\n";
  for (const DraftPair& d : pairs) {
    std::cout << "  specdec run -m " << models[d.target].ref << " -md " << models[d.draft].ref
              << "   # " << std::fixed << std::setprecision(2) << d.size_ratio << "\n";
  }
  return 0;
}

}  // namespace specdec::cli
