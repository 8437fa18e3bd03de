// After packing, exactly the whole pages of the packed rows are released (not the embedding,
// tied or not, nor rows read from the mapping), they are out of the process (checked page by
// page with /proc/self/pagemap), no forward pass reads them (they are made unreadable), and
// the logits are bit for bit those of a run that kept every page. (Kept pages are not checked
// for residency: the kernel may reclaim clean file pages at any time.)
#include "model/source_pages.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
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
  s.n_ff = 1024;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_vocab = 1204;  // 150 full groups of 8 output rows plus 4 rows read from the mapping
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

// The whole pages inside every packed matrix's packed rows: what the rule releases when nothing
// else is read from them (the layers' matrices, and the output unless it is the embedding).
size_t expected_release(const gguf::GgufFile& f, int n_layer, bool with_output) {
  std::vector<std::string> names;
  for (int l = 0; l < n_layer; ++l) {
    for (const char* m :
         {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
      names.push_back("blk." + std::to_string(l) + "." + m + ".weight");
    }
  }
  if (with_output) names.push_back("output.weight");
  size_t total = 0;
  for (const std::string& name : names) {
    const gguf::TensorInfo& t = f.tensor(name);
    const size_t stride = t.n_bytes / static_cast<size_t>(t.n_rows());
    total += interior(t.data, static_cast<size_t>(t.n_rows() / 8 * 8) * stride).second;
  }
  return total;
}

// The released ranges of the packed matrices (what expected_release sums, for an untied model).
std::vector<std::pair<const uint8_t*, size_t>> released_ranges(const gguf::GgufFile& f) {
  std::vector<std::pair<const uint8_t*, size_t>> out;
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.dims.size() < 2 || t.name == "token_embd.weight") continue;
    const size_t stride = t.n_bytes / static_cast<size_t>(t.n_rows());
    out.push_back(interior(t.data, static_cast<size_t>(t.n_rows() / 8 * 8) * stride));
  }
  return out;
}

TEST(SourcePages, PackedRowsAreReleasedAndNeverReadAgain) {
  TinyModel tm(spec(/*tied=*/false), "release.gguf");
  const gguf::GgufFile& f = *tm.file;
  ASSERT_GT(tm.model->packed_weight_bytes(), 0u);
  // Exactly the packed rows' interior pages: not the embedding, not the output's last 4 rows.
  EXPECT_EQ(tm.model->released_weight_bytes(), expected_release(f, 2, /*with_output=*/true));
  if (pagemap_readable()) {
    // Out of the process right after loading. (Later, a read of a kept page can map the cached
    // pages around it again, the kernel's fault-around and large page-cache folios, so residency
    // is no test of what is read; the next check is.)
    size_t resident_now = 0;
    for (const auto& [lo, n] : released_ranges(f)) resident_now += resident(lo, n);
    EXPECT_EQ(resident_now, 0u);
  }

  // Nothing reads the released bytes: with them unreadable (PROT_NONE), forward passes run and
  // give the same logits (a read would kill the child with SIGSEGV).
  const std::vector<float> logits = run(*tm.model);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        for (const auto& [lo, n] : released_ranges(f)) {
          if (n > 0 && mprotect(const_cast<uint8_t*>(lo), n, PROT_NONE) != 0) std::_Exit(3);
        }
        std::_Exit(testing::bitwise_equal(run(*tm.model), logits) ? 0 : 4);
      },
      ::testing::ExitedWithCode(0), "");

  // And the result is exactly what a model that kept its pages computes.
  ScopedEnv keep("SPECDEC_NO_RELEASE", "1");
  TinyModel kept(spec(false), "kept.gguf");
  EXPECT_EQ(kept.model->released_weight_bytes(), 0u);
  EXPECT_TRUE(testing::bitwise_equal(run(*kept.model), logits));
}

TEST(SourcePages, ATiedEmbeddingIsKept) {
  TinyModel tm(spec(/*tied=*/true), "tied.gguf");
  // The embedding is packed as the output matrix but still read for lookups: only the layers'
  // matrices go.
  EXPECT_GT(tm.model->packed_weight_bytes(), 0u);
  EXPECT_EQ(tm.model->released_weight_bytes(),
            expected_release(*tm.file, 2, /*with_output=*/false));
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
