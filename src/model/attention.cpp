#include "model/attention.h"

#include <algorithm>
#include <cmath>

#include "model/ops.h"
#include "tensor/thread_pool.h"

namespace specdec {
namespace {

// One query head of one token over n_slots cache slots. scores has room for n_slots floats.
void attend(const float* q, const KvCache& cache, int32_t layer, int32_t kv_offset, int32_t n_slots,
            int32_t head_dim, float scale, float* scores, float* out) {
  // Scores, then a max-subtracted softmax (exp of non-positive values cannot overflow).
  float max_score = -INFINITY;
  for (int32_t s = 0; s < n_slots; ++s) {
    scores[s] = ops::dot(q, cache.k(layer, s) + kv_offset, head_dim) * scale;
    max_score = std::max(max_score, scores[s]);
  }
  float sum = 0.0f;
  for (int32_t s = 0; s < n_slots; ++s) {
    scores[s] = std::exp(scores[s] - max_score);
    sum += scores[s];
  }
  // Weighted sum of V rows in slot order, normalized once at the end.
  std::fill(out, out + head_dim, 0.0f);
  for (int32_t s = 0; s < n_slots; ++s) {
    const float p = scores[s];
    const float* v = cache.v(layer, s) + kv_offset;
    for (int32_t d = 0; d < head_dim; ++d) out[d] += p * v[d];
  }
  const float inv_sum = 1.0f / sum;
  for (int32_t d = 0; d < head_dim; ++d) out[d] *= inv_sum;
}

}  // namespace

void causal_attention(const ModelConfig& c, const KvCache& cache, int32_t layer, int32_t first_slot,
                      const float* q, int64_t k, float* out, Scratch& scratch, ThreadPool& pool) {
  const int64_t n_items = k * c.n_head;
  const int32_t group = c.n_head / c.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  // Each part owns one row of score scratch; parts are processed by whichever thread gets
  // them, which changes nothing about what an item computes.
  const int64_t n_parts = std::min<int64_t>(n_items, pool.size());
  const int64_t max_slots = first_slot + k;
  if (scratch.score_parts < n_parts || scratch.score_slots < max_slots) {
    scratch.score_parts = std::max(scratch.score_parts, n_parts);
    scratch.score_slots = std::max(scratch.score_slots, max_slots);
    scratch.scores.resize(static_cast<size_t>(scratch.score_parts * scratch.score_slots));
  }
  const int64_t slots_stride = scratch.score_slots;
  float* scores_base = scratch.scores.data();
  pool.parallel_for(n_parts, [&](int64_t part_begin, int64_t part_end) {
    for (int64_t part = part_begin; part < part_end; ++part) {
      float* scores = scores_base + part * slots_stride;
      const int64_t item_end = n_items * (part + 1) / n_parts;
      for (int64_t item = n_items * part / n_parts; item < item_end; ++item) {
        const int64_t i = item / c.n_head;
        const int32_t h = static_cast<int32_t>(item % c.n_head);
        const size_t row = static_cast<size_t>(i) * c.q_dim() + static_cast<size_t>(h) * c.head_dim;
        attend(q + row, cache, layer, (h / group) * c.head_dim,
               first_slot + static_cast<int32_t>(i) + 1, c.head_dim, scale, scores, out + row);
      }
    }
  });
}

}  // namespace specdec
