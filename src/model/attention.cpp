#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/ops.h"
#include "tensor/q8_rows.h"
#include "tensor/thread_pool.h"
#include "tensor/vec_ops.h"

namespace specdec {
namespace {

// Query-key multiply-adds (as many again for V) below which attention stays on the calling
// thread. A hand-off costs a few microseconds when the workers are spinning; 2 x 32k
// multiply-adds take longer than that. A SmolLM2 decode token (9 heads of 64) reaches it at a
// context of about 60.
constexpr int64_t kMinParallelWork = 1 << 15;
// New tokens attended together: their score rows span the whole cache and live in scratch at
// once, so a block is at most 16 tokens and its rows at most 16 Mi floats (64 MiB; a long prompt
// goes through in blocks, a huge context with many heads one token at a time).
constexpr int64_t kMaxBlockTokens = 16;
constexpr int64_t kMaxScoreFloats = int64_t{16} << 20;
// Cache rows of one KV head per part of the score phase: about 16 KiB of keys, which stay in L1
// while every query of the block is scored against them.
constexpr int64_t kChunkBytes = 16 << 10;
// Columns per part of the V phase: the multi-query kernel keeps 3 queries x 32 in registers.
constexpr int64_t kColumnBlock = 32;

// One block of new tokens [t0, t0 + nt) in three phases, each split into parts that any thread
// may take: (1) scores of every query head against a chunk of one KV head's keys, the heads
// sharing that KV head together so each key is loaded once per few heads; (2) per query head a
// max-subtracted softmax over its slots; (3) per token, KV head and column block the weighted
// sum of V, again for the heads sharing the values at once. Every score, probability and output
// element is computed by the same operations in the same order whatever the block, the parts or
// the threads (the kernels' multi-query forms equal their one-query forms bit for bit), so the
// results do not depend on k or the thread count. When the threads divide the KV heads (the
// Qwen2.5 pair's 2 on 2 threads), head() runs the three phases for one KV head at a time
// instead, one hand-off per block rather than three.
// A thread's floats of f16 cache rows (KvType::F16): converted chunk by chunk, at most
// chunk_rows x head_dim at once. It grows only until it holds the largest chunk, so the decode
// loop does not allocate.
float* converted_rows(int64_t floats) {
  thread_local std::vector<float> rows;
  if (rows.size() < static_cast<size_t>(floats)) rows.resize(static_cast<size_t>(floats));
  return rows.data();
}

struct Block {
  const ModelConfig& c;
  const KvCache& cache;
  int32_t layer, window, group;
  float scale;
  int64_t t0, nt, first_slot, score_stride, chunk_rows;
  const float* q;
  float* out;
  float* scores;    // (token in block, head) rows of score_stride slots, indexed by slot
  float* inv_sums;  // per (token in block, head)
  // A q8_0 cache's keys are scored against the block's queries quantized once per block:
  // (token in block, head) rows of q8_query_bytes(head_dim) (unused otherwise).
  const uint8_t* q8_queries;

  bool q8_keys() const { return cache.types().k == KvType::Q8_0; }
  const uint8_t* q8_query(int64_t ti, int32_t h) const {
    return q8_queries + (ti * c.n_head + h) * q8_query_bytes(c.head_dim);
  }

  int32_t last(int64_t ti) const { return static_cast<int32_t>(first_slot + t0 + ti); }
  int32_t first(int64_t ti) const { return window > 0 ? std::max(0, last(ti) - window + 1) : 0; }
  float* score_row(int64_t ti, int32_t h) const {
    return scores + (ti * c.n_head + h) * score_stride;
  }
  const float* q_row(int64_t ti, int32_t h) const {
    return q + (t0 + ti) * c.q_dim() + static_cast<int64_t>(h) * c.head_dim;
  }
  float* out_row(int64_t ti, int32_t h) const {
    return out + (t0 + ti) * c.q_dim() + static_cast<int64_t>(h) * c.head_dim;
  }

  // KV head g's keys (values) of slots [s0, s1) as floats, row s0 first: the cache's own rows
  // when that part is f32, else its f16 rows (values: f16 or q8_0 rows) converted, at most
  // chunk_rows of them. q8_0 keys are never converted: score_chunk scores them as they are.
  const float* key_rows(int32_t g, int32_t s0, int32_t s1) const {
    if (cache.types().k == KvType::F32) return cache.k(layer, g, s0);
    float* rows = converted_rows(chunk_rows * c.head_dim);
    fp16_to_fp32_row(cache.k16(layer, g, s0), rows, int64_t{s1 - s0} * c.head_dim);
    return rows;
  }
  const float* value_rows(int32_t g, int32_t s0, int32_t s1) const {
    if (cache.types().v == KvType::F32) return cache.v(layer, g, s0);
    float* rows = converted_rows(chunk_rows * c.head_dim);
    convert_values(g, s0, s1, 0, c.head_dim, rows);
    return rows;
  }
  // Columns [d0, d0 + nd) of KV head g's f16 or q8_0 values in slots [s0, s1) as floats, row s0
  // first, nd floats apart: the same floats for a column range as for whole rows.
  void convert_values(int32_t g, int32_t s0, int32_t s1, int64_t d0, int64_t nd,
                      float* rows) const {
    if (cache.types().v == KvType::Q8_0) {
      dequantize_q8_rows(cache.v8(layer, g, s0), s1 - s0, c.head_dim, d0, nd, rows);
    } else if (nd == c.head_dim) {  // whole rows lie back to back: one run
      fp16_to_fp32_row(cache.v16(layer, g, s0), rows, int64_t{s1 - s0} * c.head_dim);
    } else {
      for (int32_t s = s0; s < s1; ++s) {
        fp16_to_fp32_row(cache.v16(layer, g, s) + d0, rows + int64_t{s - s0} * nd, nd);
      }
    }
  }

  // Phase 1: slots [s0, s1) of KV head g (at most chunk_rows), for every token of the block
  // (where causal and the window allow).
  void score_chunk(int32_t g, int32_t s0, int32_t s1) const {
    if (q8_keys()) {
      for (int64_t ti = 0; ti < nt; ++ti) {
        const int32_t a = std::max(s0, first(ti)), b = std::min(s1, last(ti) + 1);
        if (a >= b) continue;
        const int32_t h0 = g * group;
        q8_tile_scores(q8_query(ti, h0), static_cast<int64_t>(q8_query_bytes(c.head_dim)), group,
                       cache.k8_tiles(layer, g), c.head_dim, a, b - a, score_row(ti, h0) + a,
                       score_stride);
      }
      return;
    }
    const float* keys = key_rows(g, s0, s1);
    for (int64_t ti = 0; ti < nt; ++ti) {
      const int32_t a = std::max(s0, first(ti)), b = std::min(s1, last(ti) + 1);
      if (a >= b) continue;
      const int32_t h0 = g * group;
      dot_rows_multi_f32(q_row(ti, h0), c.head_dim, group, keys + int64_t{a - s0} * c.head_dim,
                         c.head_dim, b - a, c.head_dim, score_row(ti, h0) + a, score_stride);
    }
  }

  // Phase 2: scaled scores to exp(score - max), remembering 1 / sum. The exp is std::exp's
  // (softmax_exp_f32): Gemma's fp16-rounded GELU turns 1-ulp differences here into visible
  // logit changes, and the oracle fixtures were matched with std::exp.
  void softmax(int64_t ti, int32_t h) const {
    const int32_t a = first(ti), b = last(ti) + 1;
    inv_sums[ti * c.n_head + h] = 1.0f / softmax_exp_f32(score_row(ti, h) + a, b - a, scale);
  }

  // All three phases for KV head g, every token of the block, on one thread: keys and values
  // are read in chunks that stay in L1 while every token and query head uses them, and the
  // weighted sums run over whole rows (all columns), so the thread streams its head's cache
  // once, front to back. Each value is computed by the same operations in the same order as in
  // the phase-by-phase split: a sum over several chunks continues from where the last chunk left
  // it in `out`, exactly as one call over all the rows would.
  void head(int32_t g) const {
    const int32_t lo = first(0), hi = last(nt - 1) + 1;
    for (int32_t s0 = lo; s0 < hi; s0 += static_cast<int32_t>(chunk_rows)) {
      score_chunk(g, s0, static_cast<int32_t>(std::min<int64_t>(hi, s0 + chunk_rows)));
    }
    const int32_t h0 = g * group;
    for (int64_t ti = 0; ti < nt; ++ti) {
      for (int32_t h = h0; h < h0 + group; ++h) {
        softmax(ti, h);
        std::fill_n(out_row(ti, h), c.head_dim, 0.0f);
      }
    }
    for (int32_t s0 = lo; s0 < hi; s0 += static_cast<int32_t>(chunk_rows)) {
      const auto s1 = static_cast<int32_t>(std::min<int64_t>(hi, s0 + chunk_rows));
      const float* values = value_rows(g, s0, s1);
      for (int64_t ti = 0; ti < nt; ++ti) {
        const int32_t a = std::max(s0, first(ti)), b = std::min(s1, last(ti) + 1);
        if (a >= b) continue;
        weighted_sum_rows_multi_f32(score_row(ti, h0) + a, score_stride, group,
                                    values + int64_t{a - s0} * c.head_dim, c.head_dim, b - a,
                                    c.head_dim, out_row(ti, h0), c.head_dim);
      }
    }
    for (int64_t ti = 0; ti < nt; ++ti) {
      for (int32_t h = h0; h < h0 + group; ++h) {
        const float inv_sum = inv_sums[ti * c.n_head + h];
        float* o = out_row(ti, h);
        for (int64_t d = 0; d < c.head_dim; ++d) o[d] *= inv_sum;
      }
    }
  }

  // Phase 3: columns [d0, d0 + nd) of the heads sharing KV head g, for token ti: the weighted
  // sum of V rows in slot order, normalized once at the end.
  void values(int64_t ti, int32_t g, int64_t d0, int64_t nd) const {
    const int32_t a = first(ti), b = last(ti) + 1;
    const int32_t h0 = g * group;
    for (int32_t h = h0; h < h0 + group; ++h) std::fill_n(out_row(ti, h) + d0, nd, 0.0f);
    if (cache.types().v == KvType::F32) {
      weighted_sum_rows_multi_f32(score_row(ti, h0) + a, score_stride, group,
                                  cache.v(layer, g, a) + d0, c.head_dim, b - a, nd,
                                  out_row(ti, h0) + d0, c.head_dim);
    } else {
      // The columns [d0, d0 + nd) of chunk_rows rows at a time; a sum over several chunks goes
      // on from where the last left it, as one call over all the rows would.
      float* rows = converted_rows(chunk_rows * nd);
      for (int32_t s0 = a; s0 < b; s0 += static_cast<int32_t>(chunk_rows)) {
        const auto s1 = static_cast<int32_t>(std::min<int64_t>(b, s0 + chunk_rows));
        convert_values(g, s0, s1, d0, nd, rows);
        weighted_sum_rows_multi_f32(score_row(ti, h0) + s0, score_stride, group, rows, nd, s1 - s0,
                                    nd, out_row(ti, h0) + d0, c.head_dim);
      }
    }
    for (int32_t h = h0; h < h0 + group; ++h) {
      const float inv_sum = inv_sums[ti * c.n_head + h];
      float* o = out_row(ti, h) + d0;
      for (int64_t d = 0; d < nd; ++d) o[d] *= inv_sum;
    }
  }
};

}  // namespace

void causal_attention(const ModelConfig& c, const KvCache& cache, int32_t layer, int32_t first_slot,
                      const float* q, int64_t k, float* out, Scratch& scratch, ThreadPool& pool,
                      float scale, int32_t window) {
  // Score rows span the whole cache, so the buffer is sized once per cache size rather than
  // growing with the context (the decode loop must not allocate).
  const int64_t cap = cache.capacity();
  const int64_t block_tokens =
      std::clamp<int64_t>(kMaxScoreFloats / (int64_t{c.n_head} * cap), 1, kMaxBlockTokens);
  const auto n_rows = static_cast<size_t>(block_tokens * c.n_head);
  if (scratch.scores.size() < n_rows * static_cast<size_t>(cap)) {
    scratch.scores.assign(n_rows * static_cast<size_t>(cap), 0.0f);
  }
  if (scratch.inv_sums.size() < n_rows) scratch.inv_sums.assign(n_rows, 0.0f);
  const bool q8_keys = cache.types().k == KvType::Q8_0;
  const size_t query_bytes = q8_query_bytes(c.head_dim);
  if (q8_keys && scratch.q8_queries.size() < n_rows * query_bytes) {
    scratch.q8_queries.assign(n_rows * query_bytes, 0);
  }
  const int32_t n_kv = c.n_head_kv;
  const int64_t chunk_rows = std::max<int64_t>(4, kChunkBytes / (c.head_dim * 4) / 4 * 4);
  const int64_t col_block = std::min<int64_t>(kColumnBlock, c.head_dim);
  const int64_t n_col_blocks = (c.head_dim + col_block - 1) / col_block;

  for (int64_t t0 = 0; t0 < k; t0 += block_tokens) {
    const Block blk{c,
                    cache,
                    layer,
                    window,
                    c.n_head / n_kv,
                    scale,
                    t0,
                    std::min(block_tokens, k - t0),
                    first_slot,
                    cap,
                    chunk_rows,
                    q,
                    out,
                    scratch.scores.data(),
                    scratch.inv_sums.data(),
                    scratch.q8_queries.data()};
    if (q8_keys) {
      for (int64_t ti = 0; ti < blk.nt; ++ti) {
        for (int32_t h = 0; h < c.n_head; ++h) {
          quantize_q8_query(blk.q_row(ti, h), c.head_dim,
                            scratch.q8_queries.data() + (ti * c.n_head + h) * query_bytes);
        }
      }
    }
    // Slots any token of the block attends: [first of its first token, last of its last].
    const int32_t lo = blk.first(0), hi = blk.last(blk.nt - 1) + 1;
    const int64_t n_chunks = (hi - lo + chunk_rows - 1) / chunk_rows;
    auto score_part = [&](int64_t part) {
      const auto g = static_cast<int32_t>(part / n_chunks);
      const auto s0 = static_cast<int32_t>(lo + (part % n_chunks) * chunk_rows);
      blk.score_chunk(g, s0, static_cast<int32_t>(std::min<int64_t>(hi, s0 + chunk_rows)));
    };
    auto softmax_part = [&](int64_t part) {
      blk.softmax(part / c.n_head, static_cast<int32_t>(part % c.n_head));
    };
    auto values_part = [&](int64_t part) {
      const int64_t cb = part % n_col_blocks, rest = part / n_col_blocks;
      const int64_t d0 = cb * col_block;
      blk.values(rest / n_kv, static_cast<int32_t>(rest % n_kv), d0,
                 std::min(col_block, c.head_dim - d0));
    };
    const int64_t n_score = n_kv * n_chunks, n_soft = blk.nt * c.n_head,
                  n_values = blk.nt * n_kv * n_col_blocks;

    // Short contexts are cheaper on the calling thread than handed out; one thread, or a
    // thread count that divides the KV heads, takes whole heads (one hand-off, each head's
    // cache streamed once); otherwise the three phases are split finer (three hand-offs). The
    // split never changes what a part computes.
    const int64_t work = blk.nt * c.n_head * static_cast<int64_t>(hi - lo) * c.head_dim;
    if (work < kMinParallelWork || pool.size() == 1) {
      for (int32_t g = 0; g < n_kv; ++g) blk.head(g);
      continue;
    }
    if (n_kv % pool.size() == 0) {
      pool.parallel_for(n_kv, [&](int64_t b, int64_t e) {
        for (int64_t g = b; g < e; ++g) blk.head(static_cast<int32_t>(g));
      });
      continue;
    }
    pool.parallel_for(n_score, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) score_part(p);
    });
    pool.parallel_for(n_soft, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) softmax_part(p);
    });
    pool.parallel_for(n_values, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) values_part(p);
    });
  }
}

}  // namespace specdec
