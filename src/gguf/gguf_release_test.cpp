// GgufFile::release_pages: only whole pages inside the range (and inside the mapping) leave the
// process, the returned count says how many bytes, and the data reads back unchanged.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "common/process_memory.h"
#include "gguf/gguf_test_util.h"

namespace specdec::gguf {
namespace {

TEST(GgufRelease, DropsWholeInteriorPagesAndKeepsTheBytes) {
  testing::TempDir dir;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<uint8_t> bytes(40 * page);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.add_tensor("blob", {static_cast<int64_t>(bytes.size() / 4)}, GgmlType::F32, bytes);
  w.write(dir.file("blob.gguf"));
  auto f = GgufFile::open(dir.file("blob.gguf"));
  const TensorInfo& t = f->tensor("blob");
  ASSERT_EQ(t.n_bytes, bytes.size());
  volatile uint8_t sink = 0;
  for (size_t i = 0; i < t.n_bytes; i += page) sink = sink + t.data[i];  // map every page

  // Starting 1 byte into the data: its first, partial page stays; the whole ones after go.
  const uint8_t* begin = t.data + 1;
  const size_t n = 10 * page;
  const auto lo = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
  const auto hi = (reinterpret_cast<uintptr_t>(begin) + n) / page * page;
  EXPECT_EQ(f->release_pages(begin, n), hi - lo);
  if (const auto r = resident_bytes(reinterpret_cast<const void*>(lo), hi - lo)) {
    EXPECT_EQ(*r, 0u);
    EXPECT_EQ(resident_bytes(begin, 1), page);  // the partial first page
  }
  EXPECT_EQ(std::memcmp(t.data, bytes.data(), bytes.size()), 0);  // faults back from the file

  // Nothing outside the mapping, nothing smaller than a page.
  EXPECT_EQ(f->release_pages(f->mapping().data() + f->mapping().size(), 10 * page), 0u);
  EXPECT_EQ(f->release_pages(t.data + 1, page / 2), 0u);
  // A range running past the end is clipped to the mapping.
  const uint8_t* end = f->mapping().data() + f->mapping().size();
  EXPECT_LE(f->release_pages(end - 3 * page, 100 * page), 3 * page);
  EXPECT_EQ(std::memcmp(t.data, bytes.data(), bytes.size()), 0);
}

// Access::Read (--no-mmap): the same bytes, read whole at open. Released pages are freed for
// good and made inaccessible, so a read of one faults instead of seeing zeros; the bytes around
// them stay.
TEST(GgufRelease, AFileReadWholeHoldsTheSameBytesAndFreesWhatItReleases) {
  testing::TempDir dir;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<uint8_t> bytes(12 * page);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 13 + 1);
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.add_tensor("blob", {static_cast<int64_t>(bytes.size() / 4)}, GgmlType::F32, bytes);
  w.write(dir.file("blob.gguf"));
  const auto mapped = GgufFile::open(dir.file("blob.gguf"));
  const auto read = GgufFile::open(dir.file("blob.gguf"), GgufFile::Access::Read);
  EXPECT_EQ(mapped->access(), GgufFile::Access::Map);
  EXPECT_EQ(read->access(), GgufFile::Access::Read);
  ASSERT_EQ(read->mapping().size(), mapped->mapping().size());
  EXPECT_EQ(std::memcmp(read->mapping().data(), mapped->mapping().data(), read->mapping().size()),
            0);
  EXPECT_EQ(read->get_string("general.architecture"), "llama");
  const TensorInfo& t = read->tensor("blob");
  EXPECT_EQ(std::memcmp(t.data, bytes.data(), bytes.size()), 0);

  // Pages 2..5 of the tensor's data (from its first page boundary on) go; the rest stays.
  const auto first = (reinterpret_cast<uintptr_t>(t.data) + page - 1) / page * page;
  const size_t skip = first - reinterpret_cast<uintptr_t>(t.data);
  const uint8_t* lo = t.data + skip + 2 * page;
  EXPECT_EQ(read->release_pages(lo, 4 * page), 4 * page);
  if (const auto r = resident_bytes(lo, 4 * page)) {
    EXPECT_EQ(*r, 0u);
  }
  const size_t cut = skip + 2 * page;
  EXPECT_EQ(std::memcmp(t.data, bytes.data(), cut), 0);
  EXPECT_EQ(std::memcmp(t.data + cut + 4 * page, bytes.data() + cut + 4 * page,
                        bytes.size() - cut - 4 * page),
            0);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        volatile uint8_t v = lo[page];
        (void)v;
      },
      "");
  // Less than a page releases nothing.
  EXPECT_EQ(read->release_pages(t.data + cut + 4 * page + 1, page / 2), 0u);
}

}  // namespace
}  // namespace specdec::gguf
