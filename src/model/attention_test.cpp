// causal_attention against a plain loop with the same roundings (scalar dot with 8 partial
// sums, std::exp softmax, multiply-then-add weighted sums): bit for bit on every kernel path,
// every way of splitting the work (one thread, whole KV heads per thread, the three-phase split
// when the thread count does not divide the KV heads), new-token counts that cross the 16-token
// block, grouped and ungrouped heads, and sliding windows.
#include "model/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "model/model_impl.h"
#include "support/random_floats.h"
#include "tensor/cpu_features.h"
#include "tensor/q8_rows.h"
#include "tensor/quantize.h"
#include "tensor/thread_pool.h"
#include "tensor/vec_ops.h"

namespace specdec {
namespace {

ModelConfig attention_config(int32_t n_head, int32_t n_head_kv, int32_t head_dim) {
  ModelConfig c;
  c.arch = "qwen2";
  c.n_vocab = 16;
  c.n_layer = 2;
  c.n_head = n_head;
  c.n_head_kv = n_head_kv;
  c.head_dim = head_dim;
  c.rope_dim = head_dim;
  c.n_embd = n_head * head_dim;
  c.n_ff = 4;
  return c;
}

// Each cache entry (layer l, KV head g, slot s < cap) in that order with its K and V, read from
// kv (2 x head_dim floats per entry, K first): f(l, g, s, k, v).
template <typename F>
void for_each_entry(const ModelConfig& c, int32_t cap, const std::vector<float>& kv, F f) {
  size_t at = 0;
  for (int32_t l = 0; l < c.n_layer; ++l) {
    for (int32_t g = 0; g < c.n_head_kv; ++g) {
      for (int32_t s = 0; s < cap; ++s) {
        f(l, g, s, &kv[at], &kv[at + static_cast<size_t>(c.head_dim)]);
        at += 2 * static_cast<size_t>(c.head_dim);
      }
    }
  }
}

// Token i of the k new ones (slot first_slot + i), query head h: the same operations in the same
// order as the kernels, one value at a time.
std::vector<float> reference(const ModelConfig& c, const KvCache& cache, int32_t layer,
                             int32_t first_slot, const std::vector<float>& q, int64_t k,
                             float scale, int32_t window) {
  const int32_t group = c.n_head / c.n_head_kv;
  std::vector<float> out(q.size(), 0.0f);
  for (int64_t i = 0; i < k; ++i) {
    const auto last = static_cast<int32_t>(first_slot + i);
    const int32_t first = window > 0 ? std::max(0, last - window + 1) : 0;
    for (int32_t h = 0; h < c.n_head; ++h) {
      const int32_t g = h / group;
      const float* qh = q.data() + i * c.q_dim() + static_cast<int64_t>(h) * c.head_dim;
      std::vector<float> p;
      for (int32_t s = first; s <= last; ++s) {
        p.push_back(dot_f32_scalar(qh, cache.k(layer, g, s), c.head_dim));
      }
      const float inv_sum = 1.0f / softmax_exp_f32_scalar(p.data(), std::ssize(p), scale);
      float* o = out.data() + i * c.q_dim() + static_cast<int64_t>(h) * c.head_dim;
      for (int32_t s = first; s <= last; ++s) {
        axpy_f32_scalar(p[static_cast<size_t>(s - first)], cache.v(layer, g, s), o, c.head_dim);
      }
      for (int32_t d = 0; d < c.head_dim; ++d) o[d] *= inv_sum;
    }
  }
  return out;
}

TEST(Attention, EqualsThePlainLoopOnEveryPathAndSplit) {
  struct Shape {
    int32_t n_head, n_head_kv, head_dim;
  };
  // Qwen2.5-1.5B's grouping (6 per KV head, 128 wide), the 0.5B's (7, 64), SmolLM2's (3 of 3),
  // one KV head (Gemma 3 270M), and a width with AVX tails.
  for (const Shape sh :
       {Shape{12, 2, 128}, Shape{14, 2, 64}, Shape{9, 3, 64}, Shape{4, 1, 256}, Shape{4, 4, 40}}) {
    const ModelConfig c = attention_config(sh.n_head, sh.n_head_kv, sh.head_dim);
    const int32_t depth = 300;
    KvCache cache(c, depth + 40);
    const std::vector<float> kv =
        testing::random_floats(static_cast<size_t>(2) * c.n_layer * (depth + 40) * c.kv_dim(), 5);
    for_each_entry(c, depth + 40, kv,
                   [&](int32_t l, int32_t g, int32_t s, const float* k, const float* v) {
                     cache.store(l, g, s, k, v);
                   });
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    for (int64_t k : {1, 5, 17}) {
      const std::vector<float> q =
          testing::random_floats(static_cast<size_t>(k * c.q_dim()), static_cast<uint32_t>(k));
      for (int32_t window : {0, 24}) {
        for (int32_t first_slot : {3, depth}) {
          const std::vector<float> want = reference(c, cache, 1, first_slot, q, k, scale, window);
          for (Isa isa : kAllIsas) {
            if (!cpu_supports(isa)) continue;
            for (int threads : {1, 2, 3, 4}) {
              const Isa saved = active_isa();
              set_active_isa(isa);
              ThreadPool pool(threads);
              Scratch scratch;
              std::vector<float> out(q.size(), -7.0f);
              causal_attention(c, cache, 1, first_slot, q.data(), k, out.data(), scratch, pool,
                               scale, window);
              set_active_isa(saved);
              ASSERT_EQ(std::memcmp(out.data(), want.data(), sizeof(float) * out.size()), 0)
                  << "heads " << sh.n_head << "/" << sh.n_head_kv << " x " << sh.head_dim << ", k "
                  << k << ", window " << window << ", first slot " << first_slot << ", "
                  << isa_name(isa) << ", " << threads << " threads";
            }
          }
        }
      }
    }
  }
}

// An f16 cache (K, V or both): attention equals the plain loop over an f32 cache holding the
// same values rounded to fp16, bit for bit, on every path and split, so f16 entries keep
// attention batch invariant.
TEST(Attention, F16CachesEqualTheLoopOverTheRoundedValues) {
  struct Shape {
    int32_t n_head, n_head_kv, head_dim;
  };
  for (const Shape sh : {Shape{12, 2, 128}, Shape{9, 3, 64}, Shape{4, 4, 40}}) {
    const ModelConfig c = attention_config(sh.n_head, sh.n_head_kv, sh.head_dim);
    const int32_t depth = 200, cap = depth + 20;
    const std::vector<float> kv =
        testing::random_floats(static_cast<size_t>(2) * c.n_layer * cap * c.kv_dim(), 9);
    for (const KvTypes types :
         {KvTypes{KvType::F16, KvType::F32}, KvTypes{KvType::F32, KvType::F16},
          KvTypes{KvType::F16, KvType::F16}}) {
      KvCache cache(c, cap, types), rounded(c, cap);
      std::vector<float> kr(static_cast<size_t>(c.head_dim)), vr(kr.size());
      for_each_entry(c, cap, kv,
                     [&](int32_t l, int32_t g, int32_t s, const float* k, const float* v) {
                       cache.store(l, g, s, k, v);
                       for (int32_t d = 0; d < c.head_dim; ++d) {
                         kr[static_cast<size_t>(d)] =
                             types.k == KvType::F16 ? fp16_to_fp32(fp32_to_fp16(k[d])) : k[d];
                         vr[static_cast<size_t>(d)] =
                             types.v == KvType::F16 ? fp16_to_fp32(fp32_to_fp16(v[d])) : v[d];
                       }
                       rounded.store(l, g, s, kr.data(), vr.data());
                     });
      EXPECT_LT(cache.bytes(), rounded.bytes());
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      for (int64_t k : {1, 17}) {
        const std::vector<float> q = testing::random_floats(static_cast<size_t>(k * c.q_dim()),
                                                            static_cast<uint32_t>(k + 40));
        for (int32_t window : {0, 24}) {
          const std::vector<float> want = reference(c, rounded, 1, depth, q, k, scale, window);
          for (Isa isa : kAllIsas) {
            if (!cpu_supports(isa)) continue;
            for (int threads : {1, 2, 3}) {
              const Isa saved = active_isa();
              set_active_isa(isa);
              ThreadPool pool(threads);
              Scratch scratch;
              std::vector<float> out(q.size(), -7.0f);
              causal_attention(c, cache, 1, depth, q.data(), k, out.data(), scratch, pool, scale,
                               window);
              set_active_isa(saved);
              ASSERT_EQ(std::memcmp(out.data(), want.data(), sizeof(float) * out.size()), 0)
                  << "heads " << sh.n_head << "/" << sh.n_head_kv << " x " << sh.head_dim << ", K "
                  << kv_type_name(types.k) << ", V " << kv_type_name(types.v) << ", k " << k
                  << ", window " << window << ", " << isa_name(isa) << ", " << threads
                  << " threads";
            }
          }
        }
      }
    }
  }
}

// A q8_0 cache (K, V or both): attention equals a plain loop over what the cache stores (scores by
// the scalar integer kernel, values dequantized), bit for bit on every path and split, and a token
// attended alone equals the same token attended in a block of 17; the result stays close to the
// f32 cache's.
TEST(Attention, Q8CachesEqualTheLoopOverTheStoredValues) {
  struct Shape {
    int32_t n_head, n_head_kv, head_dim;
  };
  for (const Shape sh : {Shape{12, 2, 128}, Shape{14, 2, 64}, Shape{4, 4, 32}}) {
    const ModelConfig c = attention_config(sh.n_head, sh.n_head_kv, sh.head_dim);
    const int32_t depth = 200, cap = depth + 20;
    const std::vector<float> kv =
        testing::random_floats(static_cast<size_t>(2) * c.n_layer * cap * c.kv_dim(), 9);
    for (const KvTypes types :
         {KvTypes{KvType::Q8_0, KvType::F32}, KvTypes{KvType::F32, KvType::Q8_0},
          KvTypes{KvType::Q8_0, KvType::Q8_0}, KvTypes{KvType::Q8_0, KvType::F16}}) {
      KvCache cache(c, cap, types), exact(c, cap);
      for_each_entry(c, cap, kv,
                     [&](int32_t l, int32_t g, int32_t s, const float* k, const float* v) {
                       cache.store(l, g, s, k, v);
                       exact.store(l, g, s, k, v);
                     });
      EXPECT_LT(cache.bytes(), exact.bytes());
      EXPECT_EQ(cache.bytes(), KvCache::bytes_for(c, cap, types));
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      const int64_t k = 17;
      const std::vector<float> q = testing::random_floats(static_cast<size_t>(k * c.q_dim()), 40);
      for (int32_t window : {0, 24}) {
        // The loop: each token and head on its own, from the stored integers and scales.
        const int32_t group = c.n_head / c.n_head_kv;
        std::vector<float> want(q.size(), 0.0f);
        std::vector<uint8_t> qq(q8_query_bytes(c.head_dim));
        std::vector<float> vrow(static_cast<size_t>(c.head_dim));
        for (int64_t i = 0; i < k; ++i) {
          const auto last = static_cast<int32_t>(depth + i);
          const int32_t first = window > 0 ? std::max(0, last - window + 1) : 0;
          for (int32_t h = 0; h < c.n_head; ++h) {
            const int32_t g = h / group;
            const float* qh = q.data() + i * c.q_dim() + static_cast<int64_t>(h) * c.head_dim;
            std::vector<float> p(static_cast<size_t>(last - first + 1));
            if (types.k == KvType::Q8_0) {
              quantize_q8_query(qh, c.head_dim, qq.data());
              q8_tile_scores_scalar(qq.data(), 0, 1, cache.k8_tiles(1, g), c.head_dim, first,
                                    std::ssize(p), p.data(), 0);
            } else {
              for (int32_t s = first; s <= last; ++s) {
                p[static_cast<size_t>(s - first)] =
                    dot_f32_scalar(qh, cache.k(1, g, s), c.head_dim);
              }
            }
            const float inv_sum = 1.0f / softmax_exp_f32_scalar(p.data(), std::ssize(p), scale);
            float* o = want.data() + i * c.q_dim() + static_cast<int64_t>(h) * c.head_dim;
            for (int32_t s = first; s <= last; ++s) {
              if (types.v == KvType::Q8_0) {
                dequantize_q8_rows(cache.v8(1, g, s), 1, c.head_dim, 0, c.head_dim, vrow.data());
              } else if (types.v == KvType::F16) {
                fp16_to_fp32_row(cache.v16(1, g, s), vrow.data(), c.head_dim);
              } else {
                std::copy_n(cache.v(1, g, s), c.head_dim, vrow.data());
              }
              axpy_f32_scalar(p[static_cast<size_t>(s - first)], vrow.data(), o, c.head_dim);
            }
            for (int64_t d = 0; d < c.head_dim; ++d) o[d] *= inv_sum;
          }
        }
        const std::vector<float> f32 = reference(c, exact, 1, depth, q, k, scale, window);
        double err = 0.0, mag = 0.0;
        for (size_t i = 0; i < f32.size(); ++i) {
          err = std::max(err, double{std::fabs(want[i] - f32[i])});
          mag = std::max(mag, double{std::fabs(f32[i])});
        }
        EXPECT_LT(err, 0.05 * mag) << "q8_0 attention strays from f32's";
        for (Isa isa : kAllIsas) {
          if (!cpu_supports(isa)) continue;
          for (int threads : {1, 2, 3}) {
            for (int64_t step : {k, int64_t{1}}) {  // all 17 in one call, or one at a time
              const Isa saved = active_isa();
              set_active_isa(isa);
              ThreadPool pool(threads);
              Scratch scratch;
              std::vector<float> out(q.size(), -7.0f);
              for (int64_t t = 0; t < k; t += step) {
                causal_attention(c, cache, 1, static_cast<int32_t>(depth + t),
                                 q.data() + t * c.q_dim(), step, out.data() + t * c.q_dim(),
                                 scratch, pool, scale, window);
              }
              set_active_isa(saved);
              ASSERT_EQ(std::memcmp(out.data(), want.data(), sizeof(float) * out.size()), 0)
                  << "heads " << sh.n_head << "/" << sh.n_head_kv << " x " << sh.head_dim << ", K "
                  << kv_type_name(types.k) << ", V " << kv_type_name(types.v) << ", window "
                  << window << ", " << isa_name(isa) << ", " << threads << " threads, " << step
                  << " token(s) per call";
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace specdec
