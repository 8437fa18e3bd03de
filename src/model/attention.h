// Causal grouped-query attention over the KV cache.
#pragma once

#include <cstdint>

#include "model/kv_cache.h"
#include "model/model.h"
#include "model/model_impl.h"

namespace specdec {

class ThreadPool;

// For each new token i < k (its K/V already written to slot s = first_slot + i) and each query
// head h: softmax over slots [s - window + 1, s] (window 0: [0, s]) of scale * q.k, then the
// weighted sum of V. Query head h reads KV head h / (n_head / n_head_kv). q and out are
// k x q_dim. The work is split into phases and parts (attention.cpp); every value is computed by
// the same operations in the same order however it is split, so results do not depend on k or
// threads.
//
// The window counts slots, which are positions as long as a sequence's positions are its slot
// numbers plus a constant (how the engine uses the cache); llama.cpp masks a key at position p0
// from a query at p1 when p1 - p0 >= window, the same set. The cache keeps every slot, so
// truncate() works for local layers too.
void causal_attention(const ModelConfig& config, const KvCache& cache, int32_t layer,
                      int32_t first_slot, const float* q, int64_t k, float* out, Scratch& scratch,
                      ThreadPool& pool, float scale, int32_t window);

}  // namespace specdec
