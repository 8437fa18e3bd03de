// After packing, the mapped pages of the packed rows leave the process (checked page by page
// with /proc/self/pagemap), what is still read from the mapping stays, a forward pass does not
// bring the released pages back (nothing reads them), and the logits are bit for bit those of
// a run that kept every page.
#include "model/source_pages.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "common/process_memory.h"
#include "model/model_test_util.h"

namespace specdec {
namespace {

using testing::TinyModel;
using testing::TinyModelSpec;

// Sets an environment variable for one scope.
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TinyModelSpec spec(bool tied) {
  TinyModelSpec s;
  s.arch = "qwen2";
  s.n_embd = 256;  // Q8_0 rows of 272 bytes: every matrix spans many 4 KiB pages
  s.n_ff = 512;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_vocab = 300;  // 37 full groups of 8 output rows plus 4 rows read from the mapping
  s.weight_type = GgmlType::Q8_0;
  s.tied = tied;
  return s;
}

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

// The whole pages inside [p, p + n).
std::pair<const uint8_t*, size_t> interior(const uint8_t* p, size_t n) {
  const size_t page = page_size();
  const auto lo = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const auto hi = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  return {reinterpret_cast<const uint8_t*>(lo), hi > lo ? hi - lo : 0};
}

size_t resident(const uint8_t* p, size_t n) { return resident_bytes(p, n).value_or(SIZE_MAX); }

bool pagemap_readable() {
  static const int probe = 0;
  return resident_bytes(&probe, sizeof probe).has_value();
}

std::vector<float> run(Model& m) {
  KvCache cache(m.config(), 32);
  ThreadPool pool(2);
  return testing::forward_all(m, cache, {1, 7, 42, 299, 3}, 0, pool);
}

TEST(SourcePages, PackedRowsLeaveTheProcessAndStayOut) {
  if (!pagemap_readable()) GTEST_SKIP() << "/proc/self/pagemap is not readable here";
  TinyModel tm(spec(/*tied=*/false), "release.gguf");
  const gguf::GgufFile& f = *tm.file;
  ASSERT_GT(tm.model->packed_weight_bytes(), 0u);
  size_t expected_min = 0;
  for (const char* name : {"blk.0.attn_q.weight", "blk.1.ffn_down.weight", "output.weight"}) {
    const gguf::TensorInfo& t = f.tensor(name);
    const size_t packed = static_cast<size_t>(t.n_rows() / 8 * 8) * (t.n_bytes / t.n_rows());
    const auto [lo, n] = interior(t.data, packed);
    ASSERT_GT(n, 4 * page_size()) << name;
    EXPECT_EQ(resident(lo, n), 0u) << name << " still mapped after packing";
    expected_min += n;
  }
  EXPECT_GE(tm.model->released_weight_bytes(), expected_min);
  // The output's last 4 rows are read from the mapping: the page they start on was read when
  // the last full group was packed and must still be there.
  const gguf::TensorInfo& out = f.tensor("output.weight");
  const uint8_t* tail = out.data + 296 * (out.n_bytes / 300);
  if (reinterpret_cast<uintptr_t>(tail) % page_size() != 0) {
    EXPECT_EQ(resident(tail, 1), page_size());
  }

  // A forward pass reads packed matrices from their copies only: the pages stay out.
  const std::vector<float> logits = run(*tm.model);
  const gguf::TensorInfo& wq = f.tensor("blk.0.attn_q.weight");
  const auto [lo, n] = interior(wq.data, wq.n_bytes);
  EXPECT_EQ(resident(lo, n), 0u);

  // And the result is exactly what a model that kept its pages computes.
  ScopedEnv keep("SPECDEC_NO_RELEASE", "1");
  TinyModel kept(spec(false), "kept.gguf");
  EXPECT_EQ(kept.model->released_weight_bytes(), 0u);
  const gguf::TensorInfo& kq = kept.file->tensor("blk.0.attn_q.weight");
  const auto [klo, kn] = interior(kq.data, kq.n_bytes);
  EXPECT_EQ(resident(klo, kn), kn);  // read by packing, kept
  EXPECT_TRUE(testing::bitwise_equal(run(*kept.model), logits));
}

TEST(SourcePages, ATiedEmbeddingIsKept) {
  if (!pagemap_readable()) GTEST_SKIP() << "/proc/self/pagemap is not readable here";
  TinyModel tm(spec(/*tied=*/true), "tied.gguf");
  const gguf::TensorInfo& embd = tm.file->tensor("token_embd.weight");
  // Packed as the output matrix (so read at load), and still needed for embedding lookups.
  const auto [lo, n] = interior(embd.data, embd.n_bytes);
  ASSERT_GT(n, 0u);
  EXPECT_EQ(resident(lo, n), n);
  EXPECT_GT(tm.model->released_weight_bytes(), 0u);  // the layers' matrices still go
  const std::vector<float> logits = run(*tm.model);
  ScopedEnv keep("SPECDEC_NO_RELEASE", "1");
  TinyModel kept(spec(true), "tied_kept.gguf");
  EXPECT_TRUE(testing::bitwise_equal(run(*kept.model), logits));
}

TEST(SourcePages, NothingIsReleasedWithoutPacking) {
  ScopedEnv no_pack("SPECDEC_NO_PACK", "1");
  TinyModel tm(spec(false), "unpacked.gguf");
  EXPECT_EQ(tm.model->packed_weight_bytes(), 0u);
  EXPECT_EQ(tm.model->released_weight_bytes(), 0u);
}

}  // namespace
}  // namespace specdec
