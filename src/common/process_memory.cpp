#include "common/process_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace specdec {

ProcessMemory read_process_memory() {
  ProcessMemory m;
  std::ifstream in("/proc/self/status");
  if (!in) return m;
  int found = 0;
  std::string line;
  while (std::getline(in, line)) {
    // Lines look like "VmRSS:	  123456 kB".
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    size_t* field = key == "VmRSS"     ? &m.rss
                    : key == "VmHWM"   ? &m.peak_rss
                    : key == "RssAnon" ? &m.rss_anon
                    : key == "RssFile" ? &m.rss_file
                                       : nullptr;
    if (field == nullptr) continue;
    std::istringstream value(line.substr(colon + 1));
    size_t kib = 0;
    if (value >> kib) {
      *field = kib * 1024;
      ++found;
    }
  }
  m.ok = found == 4;
  if (!m.ok) m = ProcessMemory{};
  return m;
}

std::optional<size_t> resident_bytes(const void* addr, size_t n) {
  if (n == 0) return size_t{0};
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(addr) / page;
  const auto end = (reinterpret_cast<uintptr_t>(addr) + n + page - 1) / page;
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  // One 64-bit entry per virtual page; bit 63 says the page is present in RAM for this process.
  std::vector<uint64_t> entries(4096);
  size_t present = 0;
  bool ok = true;
  for (uintptr_t p = begin; p < end && ok;) {
    const size_t count = std::min<uintptr_t>(entries.size(), end - p);
    const size_t want = count * sizeof(uint64_t);
    const ssize_t got = ::pread(fd, entries.data(), want, static_cast<off_t>(p * sizeof(uint64_t)));
    if (got != static_cast<ssize_t>(want)) {
      ok = false;
      break;
    }
    for (size_t i = 0; i < count; ++i) present += (entries[i] >> 63) & 1u;
    p += count;
  }
  ::close(fd);
  if (!ok) return std::nullopt;
  return present * page;
}

}  // namespace specdec
