// The GGUF models already on this machine (Ollama's store, the Hugging Face hub cache, specdec's
// own cache, directories a user names) and which of them can draft for which: a draft must share
// the target's vocabulary exactly, and pays only when it is much smaller. `specdec models`
// prints this, so that a user finds a pair without trying every combination.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model_ref.h"

namespace specdec {

struct CatalogEntry {
  std::string ref;                   // what -m takes: ollama:NAME:TAG, hf:ORG/REPO/FILE, or a path
  std::vector<std::string> aliases;  // other refs to the same file (Ollama tags of one blob)
  std::string source;                // "ollama", "huggingface" or "directory"
  std::string file;                  // the GGUF (empty when the reference did not resolve)
  int64_t bytes = 0;
  std::string error;  // why the model cannot be read ("" when it was)
  // From the file's metadata and vocabulary.
  std::string name;  // general.name
  std::string arch;
  std::string quantization;  // gguf::file_type_name
  int64_t parameters = 0;
  int32_t n_vocab = 0;
  // Equal for two models whose vocabularies check_vocab_compatible accepts: a hash of the
  // vocabulary's kind, size, bos/eos ids and every token's text (`specdec run` checks in full).
  uint64_t vocab_hash = 0;
};

// Scans the stores and directories (each directory's *.gguf files, and those one level down),
// reading each file's metadata and vocabulary (not its weights). A file or reference that cannot
// be read is listed with its error. One entry per file, ordered by source then reference.
std::vector<CatalogEntry> find_models(const ModelStores& stores,
                                      const std::vector<std::string>& dirs);

struct DraftPair {
  size_t target = 0, draft = 0;  // indices into the entries
  double size_ratio = 0;         // the draft's parameters over the target's
};

// Every (target, draft) of two readable entries with the same vocabulary where the draft has at
// most `max_ratio` of the target's parameters, ordered by target, then smallest ratio first.
std::vector<DraftPair> draft_pairs(const std::vector<CatalogEntry>& entries,
                                   double max_ratio = 0.5);

}  // namespace specdec
