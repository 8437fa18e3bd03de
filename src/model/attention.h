// Causal grouped-query attention over the KV cache.
#pragma once

#include <cstdint>

#include "model/kv_cache.h"
#include "model/model.h"
#include "model/model_impl.h"

namespace specdec {

class ThreadPool;

// For each new token i < k (its K/V already written to slot first_slot + i) and each query head
// h: softmax over slots [0, first_slot + i] of q.k / sqrt(head_dim), then the weighted sum of V.
// Query head h reads KV head h / (n_head / n_head_kv). q and out are k x q_dim. The work is
// split over (token, head) pairs; each pair is computed start to finish by one thread with a
// loop that depends only on its own slot count, so results do not depend on k or threads.
void causal_attention(const ModelConfig& config, const KvCache& cache, int32_t layer,
                      int32_t first_slot, const float* q, int64_t k, float* out, Scratch& scratch,
                      ThreadPool& pool);

}  // namespace specdec
