#include "model/attention.h"

#include <algorithm>
#include <cmath>

#include "model/ops.h"
#include "tensor/thread_pool.h"
#include "tensor/vec_ops.h"

namespace specdec {
namespace {

// Query-key multiply-adds (as many again for V) below which attention stays on the calling
// thread. A hand-off costs a few microseconds when the workers are spinning; 2 x 32k
// multiply-adds take longer than that. A SmolLM2 decode token (9 heads of 64) reaches it at a
// context of about 60.
constexpr int64_t kMinParallelWork = 1 << 15;
// Parts per thread: more parts than threads lets dynamic claiming rebalance when one thread is
// slow; each part owns a row of score scratch, so this also bounds that memory.
constexpr int64_t kPartsPerThread = 4;

// One query head of one token over cache slots [first, first + n_slots). scores has room for
// n_slots floats.
void attend(const float* q, const KvCache& cache, int32_t layer, int32_t kv_offset, int32_t first,
            int32_t n_slots, int32_t head_dim, float scale, float* scores, float* out) {
  // Scores, then a max-subtracted softmax (exp of non-positive values cannot overflow).
  const int64_t stride = cache.row_size();
  dot_rows_f32(q, cache.k(layer, first) + kv_offset, stride, n_slots, head_dim, scores);
  float max_score = -INFINITY;
  for (int32_t s = 0; s < n_slots; ++s) {
    scores[s] *= scale;
    max_score = std::max(max_score, scores[s]);
  }
  // std::exp, not the vectorized exp_f32: Gemma's fp16-rounded GELU turns 1-ulp differences
  // here into visible logit changes, and the oracle fixtures were matched with std::exp.
  float sum = 0.0f;
  for (int32_t s = 0; s < n_slots; ++s) {
    scores[s] = std::exp(scores[s] - max_score);
    sum += scores[s];
  }
  // Weighted sum of V rows in slot order, normalized once at the end.
  std::fill(out, out + head_dim, 0.0f);
  weighted_sum_rows_f32(scores, cache.v(layer, first) + kv_offset, stride, n_slots, head_dim, out);
  const float inv_sum = 1.0f / sum;
  for (int32_t d = 0; d < head_dim; ++d) out[d] *= inv_sum;
}

}  // namespace

void causal_attention(const ModelConfig& c, const KvCache& cache, int32_t layer, int32_t first_slot,
                      const float* q, int64_t k, float* out, Scratch& scratch, ThreadPool& pool,
                      float scale, int32_t window) {
  // Each part owns one row of score scratch; parts are processed by whichever thread gets
  // them, which changes nothing about what an item computes. Rows hold a whole cache, so the
  // buffer is sized once per cache size rather than growing with the context.
  // Short contexts are cheaper to do on the calling thread than to hand out (a few hundred
  // multiply-adds per item); the split never changes what an item computes.
  const int64_t n_items = k * c.n_head;
  const int64_t span = window > 0 ? std::min<int64_t>(window, first_slot + k) : first_slot + k;
  const int64_t work = n_items * span * c.head_dim;
  const int64_t n_parts = work < kMinParallelWork || pool.size() == 1
                              ? 1
                              : std::min<int64_t>(n_items, kPartsPerThread * pool.size());
  if (scratch.score_parts < n_parts || scratch.score_slots < cache.capacity()) {
    // Room for the most parts any call can use with this pool, so that crossing the
    // parallel threshold as the context grows does not allocate in the decode loop.
    scratch.score_parts =
        std::max({scratch.score_parts, n_parts, kPartsPerThread * int64_t{pool.size()}});
    scratch.score_slots = std::max<int64_t>(scratch.score_slots, cache.capacity());
    scratch.scores.resize(static_cast<size_t>(scratch.score_parts * scratch.score_slots));
  }

  // Everything the workers need, captured by one reference so that the std::function built
  // by parallel_for stays within its small-object buffer (no allocation per call).
  struct Job {
    const ModelConfig& c;
    const KvCache& cache;
    int32_t layer, first_slot, group, window;
    float scale;
    const float* q;
    float* out;
    float* scores;
    int64_t score_stride, n_items, n_parts;

    void run_part(int64_t part) const {
      float* part_scores = scores + part * score_stride;
      const int64_t item_end = n_items * (part + 1) / n_parts;
      for (int64_t item = n_items * part / n_parts; item < item_end; ++item) {
        const int64_t i = item / c.n_head;
        const auto h = static_cast<int32_t>(item % c.n_head);
        const size_t row = static_cast<size_t>(i) * c.q_dim() + static_cast<size_t>(h) * c.head_dim;
        const int32_t last = first_slot + static_cast<int32_t>(i);
        const int32_t first = window > 0 ? std::max(0, last - window + 1) : 0;
        attend(q + row, cache, layer, (h / group) * c.head_dim, first, last - first + 1, c.head_dim,
               scale, part_scores, out + row);
      }
    }
  };
  const Job job{c,
                cache,
                layer,
                first_slot,
                c.n_head / c.n_head_kv,
                window,
                scale,
                q,
                out,
                scratch.scores.data(),
                scratch.score_slots,
                n_items,
                n_parts};
  if (n_parts == 1) {
    job.run_part(0);
    return;
  }
  pool.parallel_for(n_parts, [&job](int64_t begin, int64_t end) {
    for (int64_t part = begin; part < end; ++part) job.run_part(part);
  });
}

}  // namespace specdec
