// What this process holds in memory, read from Linux's /proc, for the memory reports (specdec
// info, the run summary, --stats-json) and for the tests that check that released weight pages
// really leave the process.
#pragma once

#include <cstddef>
#include <optional>

namespace specdec {

// From /proc/self/status, in bytes. ok is false where the file or a field is missing (not
// Linux, or a kernel without RssAnon/RssFile): the fields are then 0.
struct ProcessMemory {
  bool ok = false;
  size_t rss = 0;       // VmRSS: resident now
  size_t peak_rss = 0;  // VmHWM: the most that was resident at any time
  size_t rss_anon = 0;  // RssAnon: heap and other private memory (packed copies, KV caches)
  size_t rss_file = 0;  // RssFile: pages of mapped files (the GGUF weights) in the process
};

ProcessMemory read_process_memory();

// Bytes of [addr, addr + n) (widened to whole pages) that are mapped into this process now,
// from /proc/self/pagemap's present bit. This is residency in the process, which is what
// releasing pages changes; mincore() would instead report the page cache, which keeps a clean
// file page after the process lets go of it. nullopt where pagemap cannot be read.
std::optional<size_t> resident_bytes(const void* addr, size_t n);

}  // namespace specdec
