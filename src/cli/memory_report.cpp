#include "cli/memory_report.h"

#include <sstream>

#include "cli/stats_report.h"

namespace specdec::cli {
namespace {

std::string hb(size_t bytes) { return human_bytes(static_cast<double>(bytes)); }

nlohmann::json model_json(const ModelMemory& m, int32_t n_ctx) {
  nlohmann::json j = {{"file_bytes", m.file_bytes},
                      {"weight_bytes", m.weight_bytes},
                      {"packed_bytes", m.packed_bytes},
                      {"released_bytes", m.released_bytes},
                      {"kv_cache_bytes", m.kv_cache_bytes},
                      {"kv_cache_tokens", n_ctx},
                      {"kv_cache_type_k", kv_type_name(m.kv_types.k)},
                      {"kv_cache_type_v", kv_type_name(m.kv_types.v)},
                      {"scratch_bytes", m.scratch_bytes},
                      {"file_access", m.file_read ? "read" : "map"}};
  if (m.mapped_resident) j["mapped_resident_bytes"] = *m.mapped_resident;
  return j;
}

}  // namespace

ModelMemory model_memory(const LoadedModel& lm, int32_t n_ctx, KvTypes kv_types) {
  ModelMemory m;
  m.file_bytes = lm.file->file_size();
  m.weight_bytes = lm.model->weight_bytes();
  m.file_read = lm.file->access() == gguf::GgufFile::Access::Read;
  const std::span<const uint8_t> mapping = lm.file->mapping();
  m.mapped_resident = resident_bytes(mapping.data(), mapping.size());
  m.packed_bytes = lm.model->packed_weight_bytes();
  m.released_bytes = lm.model->released_weight_bytes();
  m.kv_cache_bytes = KvCache::bytes_for(lm.model->config(), n_ctx, kv_types);
  m.kv_types = kv_types;
  m.scratch_bytes = lm.model->scratch_bytes();
  return m;
}

std::string describe_memory(const ModelMemory& m, int32_t n_ctx) {
  std::ostringstream out;
  if (m.file_read) {
    // Anonymous memory: resident but what packing freed (those bytes are gone for good).
    out << "weights " << hb(m.weight_bytes) << " read into memory (--no-mmap), packed copies "
        << hb(m.packed_bytes) << " (" << hb(m.released_bytes) << " of the read copy freed)";
  } else {
    out << "weights " << hb(m.weight_bytes) << " mapped";
    if (m.mapped_resident) out << " (" << hb(*m.mapped_resident) << " of the file resident)";
    out << ", packed copies " << hb(m.packed_bytes) << " (" << hb(m.released_bytes)
        << " of the mapping released)";
  }
  out << ", KV cache " << hb(m.kv_cache_bytes) << " (" << n_ctx << " tokens, "
      << kv_types_name(m.kv_types) << "), scratch " << hb(m.scratch_bytes);
  return out.str();
}

std::string describe_process(const ProcessMemory& p) {
  if (!p.ok) return "unknown (/proc/self/status unreadable)";
  std::ostringstream out;
  out << "resident " << hb(p.rss) << " (" << hb(p.rss_file) << " file pages, " << hb(p.rss_anon)
      << " anonymous), peak " << hb(p.peak_rss) << " (VmRSS, RssFile, RssAnon, VmHWM)";
  return out.str();
}

std::string format_memory(const LoadedModel& target, const LoadedModel* draft, int32_t n_ctx,
                          const ProcessMemory& process, KvTypes kv_types,
                          std::optional<KvTypes> draft_kv_types) {
  std::string out =
      "memory:    target " + describe_memory(model_memory(target, n_ctx, kv_types), n_ctx) + "\n";
  if (draft != nullptr) {
    out += "           draft  " +
           describe_memory(model_memory(*draft, n_ctx, draft_kv_types.value_or(kv_types)), n_ctx) +
           "\n";
  }
  return out + "process:   " + describe_process(process) + "\n";
}

nlohmann::json memory_to_json(const LoadedModel& target, const LoadedModel* draft, int32_t n_ctx,
                              const ProcessMemory& process, KvTypes kv_types,
                              std::optional<KvTypes> draft_kv_types) {
  nlohmann::json j;
  j["target"] = model_json(model_memory(target, n_ctx, kv_types), n_ctx);
  if (draft != nullptr) {
    j["draft"] = model_json(model_memory(*draft, n_ctx, draft_kv_types.value_or(kv_types)), n_ctx);
  }
  if (process.ok) {
    j["process"] = {{"rss_bytes", process.rss},
                    {"peak_rss_bytes", process.peak_rss},
                    {"rss_file_bytes", process.rss_file},
                    {"rss_anon_bytes", process.rss_anon}};
  }
  return j;
}

}  // namespace specdec::cli
