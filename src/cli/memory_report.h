// What the loaded models hold in memory, for `specdec info` and the run summary (stderr and
// --stats-json): per model the file mapping (and how much of it is resident in the process),
// the packed copies of its matrices, the mapped bytes released because only those copies are
// read (model/source_pages.h), its KV cache and activation scratch; then the whole process's
// resident set from /proc (VmRSS now, VmHWM at its peak, split into file pages and anonymous
// memory).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/process_memory.h"
#include "engine/loaded_model.h"
#include "model/kv_cache.h"

namespace specdec::cli {

struct ModelMemory {
  size_t file_bytes = 0;  // the whole GGUF, mapped read-only or read whole
  // The file was read into anonymous memory at open (--no-mmap) instead of mapped: its bytes are
  // all resident, and nothing of it can be released after packing (no file behind the pages).
  bool file_read = false;
  size_t weight_bytes = 0;                // the tensors bound from it
  std::optional<size_t> mapped_resident;  // pages of the mapping in the process now
  size_t packed_bytes = 0;                // row-interleaved copies (heap)
  size_t released_bytes = 0;              // mapped bytes handed back after packing
  size_t kv_cache_bytes = 0;              // for n_ctx tokens
  KvTypes kv_types;                       // how that cache stores K and V
  size_t scratch_bytes = 0;               // activation buffers allocated so far
};

// kv_types: how its KV cache stores K and V (--cache-type-k/-v).
ModelMemory model_memory(const LoadedModel& m, int32_t n_ctx, KvTypes kv_types = {});

// "weights 463.0 MiB mapped (150.1 MiB of the file resident), packed copies 304.5 MiB
// (301.2 MiB of the mapping released), KV cache 96.0 MiB (4096 tokens, f32), scratch 0 B"
std::string describe_memory(const ModelMemory& m, int32_t n_ctx);
// "resident 1.1 GiB (700.0 MiB file pages, 420.0 MiB anonymous), peak 1.4 GiB (VmRSS, ...)";
// "unknown" where /proc could not be read.
std::string describe_process(const ProcessMemory& p);

// One line per model, then one for the process. kv_types: the target's cache types;
// draft_kv_types: the draft's (nullopt: the target's, as EngineOptions::draft_kv_types).
std::string format_memory(const LoadedModel& target, const LoadedModel* draft, int32_t n_ctx,
                          const ProcessMemory& process, KvTypes kv_types = {},
                          std::optional<KvTypes> draft_kv_types = std::nullopt);
// {"target": {...}, "draft": {...} (with a draft), "process": {...} (where /proc has it)}.
nlohmann::json memory_to_json(const LoadedModel& target, const LoadedModel* draft, int32_t n_ctx,
                              const ProcessMemory& process, KvTypes kv_types = {},
                              std::optional<KvTypes> draft_kv_types = std::nullopt);

}  // namespace specdec::cli
