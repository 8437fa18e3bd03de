#include "common/process_memory.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace specdec {
namespace {

TEST(ProcessMemory, ReadsTheStatusFields) {
  const ProcessMemory m = read_process_memory();
  ASSERT_TRUE(m.ok) << "/proc/self/status lacks VmRSS/VmHWM/RssAnon/RssFile";
  EXPECT_GT(m.rss, 0u);
  EXPECT_GE(m.peak_rss, m.rss);
  EXPECT_LE(m.rss_anon + m.rss_file, m.rss + (1u << 20));  // RssShmem is the rest
}

TEST(ProcessMemory, ResidentBytesFollowTouchingAndReleasing) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t n = 64 * page;
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* bytes = static_cast<unsigned char*>(p);
  const std::optional<size_t> before = resident_bytes(p, n);
  if (!before) GTEST_SKIP() << "/proc/self/pagemap is not readable here";
  EXPECT_EQ(*before, 0u);  // never touched
  std::memset(bytes, 1, 10 * page);
  EXPECT_EQ(resident_bytes(p, n), 10 * page);
  EXPECT_EQ(resident_bytes(bytes + 3 * page + 5, 1), page);  // widened to its page
  const ProcessMemory touched = read_process_memory();
  ASSERT_EQ(madvise(bytes, 4 * page, MADV_DONTNEED), 0);
  EXPECT_EQ(resident_bytes(p, n), 6 * page);
  EXPECT_EQ(resident_bytes(p, 0), 0u);
  // The page-exact check is resident_bytes above. The process-wide figure also moves with
  // whatever else allocates between the two reads (under ASan its shadow memory and quarantine
  // added ~116 KiB here), so it only has to stay near where it was, not shrink by 4 pages.
  constexpr size_t kOtherAllocations = 1u << 20;
  EXPECT_LE(read_process_memory().rss, touched.rss + kOtherAllocations);
  munmap(p, n);
}

}  // namespace
}  // namespace specdec
