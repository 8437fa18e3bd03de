// `specdec info -m MODEL`: what a user needs to know about a GGUF before running it.
#include <iomanip>
#include <iostream>
#include <map>
#include <string>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/memory_report.h"
#include "cli/stats_report.h"
#include "common/error.h"
#include "engine/loaded_model.h"
#include "tensor/cpu_features.h"
#include "tensor/vec_dot.h"

namespace specdec::cli {

int info_command(const std::vector<std::string>& args) {
  std::string model_path;
  int32_t n_ctx = 4096;
  ArgParser parser("specdec info -m MODEL [options]",
                   "Prints a GGUF model's architecture, sizes, tensor types, tokenizer and the "
                   "memory a run needs.");
  parser.add_string({"-m", "--model"}, "FILE", "GGUF model file", model_path);
  parser.add_int({"-c", "--ctx-size"}, "N", "context size used for the KV-cache estimate", n_ctx, 1,
                 1 << 20);
  std::string draft_path;
  parser.add_string({"-md", "--model-draft", "--spec-draft-model"}, "FILE",
                    "also load this draft model and report what both hold in memory", draft_path);
  if (!parser.parse(args)) {
    std::cout << parser.help();
    return 0;
  }
  if (model_path.empty()) fail("-m MODEL is required (see specdec info --help)");

  LoadedModel m = LoadedModel::load(model_path);
  const ModelConfig& c = m.model->config();
  int64_t n_params = 0;
  std::map<std::string, int> type_counts;
  for (const auto& t : m.file->tensors()) {
    n_params += t.n_elements();
    type_counts[std::string(type_name(t.type))]++;
  }

  const std::string shown =
      m.file->path() == model_path ? model_path : model_path + " = " + m.file->path();
  std::cout << "file:          " << shown << " (GGUF v" << m.file->version() << ", "
            << human_bytes(static_cast<double>(m.file->file_size())) << ")\n";
  std::cout << "name:          " << m.file->get_string_or("general.name", "?") << "\n";
  std::cout << "architecture:  " << c.arch << "\n";
  std::cout << "parameters:    " << std::fixed << std::setprecision(1) << n_params / 1e6 << " M\n";
  std::cout << "layers:        " << c.n_layer << "\n";
  std::cout << "embedding:     " << c.n_embd << "\n";
  std::cout << "heads:         " << c.n_head << " (kv " << c.n_head_kv << ", head dim "
            << c.head_dim << ")\n";
  std::cout << "feed-forward:  " << c.n_ff << "\n";
  std::cout << "context:       " << c.n_ctx_train << " (trained)\n";
  std::cout << "vocabulary:    " << c.n_vocab << "\n";
  std::cout << "rope:          " << (c.rope_style == RopeStyle::Neox ? "neox" : "normal")
            << ", theta " << std::setprecision(0) << c.rope_theta << "\n";
  std::cout << "output:        " << (c.tied_output ? "tied to token embedding" : "separate")
            << "\n";
  std::cout << "tensor types:  ";
  bool first = true;
  for (const auto& [name, count] : type_counts) {
    std::cout << (first ? "" : ", ") << name << " x" << count;
    first = false;
  }
  std::cout << " (" << m.file->tensors().size() << " tensors)\n";
  const Tokenizer& tok = *m.tokenizer;
  std::cout << "tokenizer:     "
            << (tok.kind() == VocabKind::Bpe ? "byte-level BPE" : "SentencePiece")
            << (tok.pre().empty() ? "" : " (pre-tokenizer " + tok.pre() + ")") << ", "
            << tok.n_vocab() << " tokens, bos " << tok.bos() << ", eos " << tok.eos()
            << (tok.add_bos() ? ", adds BOS" : "") << "\n";
  std::cout << "chat template: " << m.chat_template->name() << "\n";
  std::cout << "memory:        " << describe_memory(model_memory(m, n_ctx), n_ctx) << "\n";
  if (!draft_path.empty()) {
    // Loaded after the target, as `specdec run` does, so the process line shows both.
    LoadedModel d = LoadedModel::load(draft_path);
    std::cout << "draft:         " << draft_path << " (" << d.model->config().arch << ", "
              << d.model->config().n_layer << " layers)\n";
    std::cout << "draft memory:  " << describe_memory(model_memory(d, n_ctx), n_ctx) << "\n";
    std::cout << "process:       " << describe_process(read_process_memory())
              << " after loading both; a run adds the KV caches and scratch\n";
  } else {
    std::cout << "process:       " << describe_process(read_process_memory())
              << " after loading; a run adds the KV cache and scratch\n";
  }
  std::cout << "kernels:       " << isa_name(active_isa()) << " (this CPU runs:";
  for (Isa isa : kAllIsas) {
    if (cpu_supports(isa)) std::cout << " " << isa_name(isa);
  }
  std::cout << "; SPECDEC_ISA caps the choice)\n";
  std::cout << "AMX tiles:     "
            << (amx_enabled()
                    ? "yes (Q4_K/Q5_K passes of " +
                          std::to_string(
                              dot_kernel(GgmlType::Q4_K, Isa::kAvx512Vnni).packed_tiles_min_rows) +
                          " or more rows; SPECDEC_AMX=0 turns them off)"
                : cpu_has_amx_int8() ? std::string("off (SPECDEC_AMX=0)")
                                     : std::string("no (this CPU or its kernel runs no AMX-INT8 "
                                                   "tiles)"))
            << "\n";
  return 0;
}

}  // namespace specdec::cli
