// Model::forward: the transformer, step by step, for k tokens on top of the KV cache; and
// forward_batch, the same pass over the new tokens of several sequences, each with its cache.
//
// Batch invariance: every step is either a matmul (invariant by contract), a per-token kernel
// from ops.h (depends only on that token's row), or attention (per token and head, over that
// token's own slot range). So row i's logits are the same bits whether it is decoded alone or
// verified among k drafted tokens, and whatever the thread count.
#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "common/error.h"
#include "model/attention.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/model_impl.h"
#include "model/ops.h"
#include "model/rope.h"
#include "tensor/thread_pool.h"
#include "tensor/weight_rows.h"

namespace specdec {
namespace {

void grow(std::vector<float>& v, int64_t k, int64_t width) {
  const auto n = static_cast<size_t>(k * width);
  if (v.size() < n) v.resize(n);
}

void reserve_scratch(const ModelConfig& c, Scratch& s, int64_t k) {
  if (s.tokens >= k) return;
  grow(s.x, k, c.n_embd);
  grow(s.xn, k, c.n_embd);
  grow(s.q, k, c.q_dim());
  grow(s.kv_k, k, c.kv_dim());
  grow(s.kv_v, k, c.kv_dim());
  grow(s.attn, k, c.q_dim());
  grow(s.proj, k, c.n_embd);
  grow(s.gate, k, c.n_ff);
  grow(s.up, k, c.n_ff);
  grow(s.rope_cos, k, c.rope_dim / 2);
  grow(s.rope_sin, k, c.rope_dim / 2);
  if (c.sliding_window > 0) {
    grow(s.rope_cos_swa, k, c.rope_dim / 2);
    grow(s.rope_sin_swa, k, c.rope_dim / 2);
  }
  s.tokens = k;
}

// Runs fn(i) for every token; spread over the pool when there is more than one token. fn must
// only touch row i, so the split cannot change results. (A template, and a wrapper capturing
// one reference, so that no std::function has to allocate in the decode loop.)
template <typename Fn>
void per_token(ThreadPool& pool, int64_t k, const Fn& fn) {
  if (k == 1) {
    fn(0);
    return;
  }
  pool.parallel_for(k, [&fn](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) fn(i);
  });
}

// Several products of the same input: grouped into one matmul_group when the matrices agree
// in type and width, otherwise one matmul each. matmul_group is bitwise equal to separate
// matmuls, so the choice never changes results.
void matmul_same_input(std::initializer_list<MatmulTarget> targets, const float* x, int64_t k,
                       ThreadPool& pool) {
  const MatmulTarget& first = *targets.begin();
  const bool uniform = std::all_of(targets.begin(), targets.end(), [&](const MatmulTarget& t) {
    return t.w->type == first.w->type && t.w->cols == first.w->cols;
  });
  if (uniform) {
    matmul_group(std::span<const MatmulTarget>(targets.begin(), targets.size()), x, k, pool);
    return;
  }
  for (const MatmulTarget& t : targets) matmul(*t.w, x, k, t.out, pool);
}

void check_arguments(const ModelConfig& c, std::span<const int32_t> tokens,
                     std::span<const int32_t> positions, const KvCache& cache,
                     std::span<const int32_t> logit_rows, const float* logits_out,
                     const float* hidden_out) {
  const auto k = static_cast<int64_t>(tokens.size());
  if (positions.size() != tokens.size()) {
    fail("forward: ", tokens.size(), " tokens but ", positions.size(), " positions");
  }
  if (cache.n_layer() != c.n_layer || cache.n_head_kv() != c.n_head_kv ||
      cache.head_dim() != c.head_dim) {
    fail("forward: KV cache was made for a different model");
  }
  if (k > cache.capacity() - cache.length()) {
    fail("KV cache overflow: ", cache.length(), " + ", k, " tokens exceed capacity ",
         cache.capacity());
  }
  for (int64_t i = 0; i < k; ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.n_vocab) {
      fail("forward: token id ", tokens[i], " outside the vocabulary [0, ", c.n_vocab, ")");
    }
    if (positions[i] < 0) fail("forward: negative position ", positions[i]);
  }
  for (size_t j = 0; j < logit_rows.size(); ++j) {
    if (logit_rows[j] < 0 || logit_rows[j] >= k || (j > 0 && logit_rows[j] <= logit_rows[j - 1])) {
      fail("forward: logit_rows must be ascending indices into the ", k, " tokens");
    }
  }
  if (!logit_rows.empty() && logits_out == nullptr && hidden_out == nullptr) {
    fail("forward: logits_out is null");
  }
}

// The output head for n_out normalized rows in s.xn: the whole vocabulary, or only a subset's
// rows as views of the matrix (so every logit comes from the kernel that computes it without a
// subset), in one hand-off. Logit row j goes to out[j * width ...].
void output_head(const WeightMatrix& head, const VocabSubset* vocab, int64_t n_out, float* out,
                 Scratch& s, ThreadPool& pool) {
  if (vocab == nullptr) {
    matmul(head, s.xn.data(), n_out, out, pool);
    return;
  }
  // One row writes straight into place; several go through scratch, since matmul lays each
  // view's rows out together.
  const auto& ranges = vocab->ranges();
  const int64_t width = vocab->width();
  s.head_views.resize(ranges.size());
  s.head_targets.resize(ranges.size());
  if (n_out > 1) s.head_out.resize(static_cast<size_t>(n_out * width));
  float* base = n_out == 1 ? out : s.head_out.data();
  int64_t offset = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    s.head_views[i] = weight_rows(head, ranges[i].first, ranges[i].second);
    s.head_targets[i] = {&s.head_views[i], base + offset * n_out};
    offset += s.head_views[i].rows;
  }
  matmul_group(s.head_targets, s.xn.data(), n_out, pool);
  if (n_out == 1) return;
  offset = 0;
  for (const WeightMatrix& v : s.head_views) {
    const float* src = base + offset * n_out;
    for (int64_t j = 0; j < n_out; ++j) {
      std::copy_n(src + j * v.rows, v.rows, out + j * width + offset);
    }
    offset += v.rows;
  }
}

// The last layer's attention for the rows whose logits were asked for (s.logit_rows, as rows of
// the whole pass) only, into s.attn's first m rows; their residual rows move to the front of
// s.x and s.logit_rows becomes 0..m-1, so that the rest of the layer and the head run over m
// rows. A run of consecutive rows of one sequence (a verify pass) is one attention call.
// Returns m.
int64_t last_layer_rows_only(const ModelConfig& c, std::span<const Model::SequenceRows> sequences,
                             int32_t layer, float scale, int32_t window, Scratch& s,
                             ThreadPool& pool) {
  const int64_t E = c.n_embd, Q = c.q_dim();
  const auto m = static_cast<int64_t>(s.logit_rows.size());
  for (int64_t j = 0; j < m;) {
    const int32_t r0 = s.logit_rows[static_cast<size_t>(j)];
    const int32_t seq = s.row_sequence[static_cast<size_t>(r0)];
    int64_t n = 1;
    while (j + n < m && s.logit_rows[static_cast<size_t>(j + n)] == r0 + n &&
           s.row_sequence[static_cast<size_t>(r0 + n)] == seq) {
      ++n;
    }
    causal_attention(c, *sequences[static_cast<size_t>(seq)].cache, layer,
                     s.row_slot[static_cast<size_t>(r0)], s.q.data() + r0 * Q, n,
                     s.attn.data() + j * Q, s, pool, scale, window);
    j += n;
  }
  // Ascending rows: row j's source s.logit_rows[j] >= j, so moving them forward in order never
  // overwrites a row still to be moved.
  for (int64_t j = 0; j < m; ++j) {
    const int64_t r = s.logit_rows[static_cast<size_t>(j)];
    if (r != j) std::copy_n(&s.x[static_cast<size_t>(r * E)], E, &s.x[static_cast<size_t>(j * E)]);
    s.logit_rows[static_cast<size_t>(j)] = static_cast<int32_t>(j);
  }
  return m;
}

}  // namespace

size_t Model::scratch_bytes() const {
  const Scratch& s = impl_->scratch;
  size_t floats = 0;
  for (const std::vector<float>* v :
       {&s.x, &s.xn, &s.q, &s.kv_k, &s.kv_v, &s.attn, &s.proj, &s.gate, &s.up, &s.rope_cos,
        &s.rope_sin, &s.rope_cos_swa, &s.rope_sin_swa, &s.scores, &s.inv_sums, &s.head_out}) {
    floats += v->capacity();
  }
  return floats * sizeof(float);
}

void Model::forward(std::span<const int32_t> tokens, std::span<const int32_t> positions,
                    KvCache& cache, std::span<const int32_t> logit_rows, float* logits_out,
                    ThreadPool& pool, const VocabSubset* vocab) {
  const SequenceRows one{tokens, positions, &cache, logit_rows, logits_out, vocab};
  forward_batch(std::span<const SequenceRows>(&one, 1), pool);
}

void Model::forward_batch(std::span<const SequenceRows> sequences, ThreadPool& pool) {
  const ModelConfig& c = config_;
  for (size_t q = 0; q < sequences.size(); ++q) {
    const SequenceRows& sq = sequences[q];
    if (sq.cache == nullptr) fail("forward: sequence ", q, " has no KV cache");
    check_arguments(c, sq.tokens, sq.positions, *sq.cache, sq.logit_rows, sq.logits_out,
                    sq.hidden_out);
    for (size_t r = 0; r < q; ++r) {
      if (sequences[r].cache == sq.cache) fail("forward: two sequences share one KV cache");
    }
  }
  const std::vector<ActiveLora>& lora = impl_->lora;
  for (const SequenceRows& sq : sequences) {
    if (!sq.lora_scales.empty()) check_lora_scales(lora, sq.lora_scales);
    if (sq.vocab != nullptr && sq.vocab->head_rows() != impl_->weights.output.rows) {
      fail("forward: vocabulary subset made for a head of ", sq.vocab->head_rows(),
           " rows, the model's has ", impl_->weights.output.rows);
    }
  }
  int64_t k = 0;
  for (const SequenceRows& sq : sequences) k += static_cast<int64_t>(sq.tokens.size());
  if (k == 0) return;

  const ModelWeights& w = impl_->weights;
  Scratch& s = impl_->scratch;
  reserve_scratch(c, s, k);
  // Every row's token, position, sequence and cache slot (its sequence's first free slot plus
  // its index there), and the logit rows of all sequences as rows of the whole pass.
  s.row_tokens.clear();
  s.row_positions.clear();
  s.row_sequence.clear();
  s.row_slot.clear();
  s.logit_rows.clear();
  s.row_lora_scales.clear();
  for (size_t q = 0; q < sequences.size(); ++q) {
    const SequenceRows& sq = sequences[q];
    const auto base = static_cast<int32_t>(s.row_tokens.size());
    for (size_t i = 0; i < sq.tokens.size() && !lora.empty(); ++i) {
      if (sq.lora_scales.empty()) {
        for (const ActiveLora& a : lora) s.row_lora_scales.push_back(a.scale);
      } else {
        s.row_lora_scales.insert(s.row_lora_scales.end(), sq.lora_scales.begin(),
                                 sq.lora_scales.end());
      }
    }
    for (int32_t r : sq.logit_rows) s.logit_rows.push_back(base + r);
    for (size_t i = 0; i < sq.tokens.size(); ++i) {
      s.row_tokens.push_back(sq.tokens[i]);
      s.row_positions.push_back(sq.positions[i]);
      s.row_sequence.push_back(static_cast<int32_t>(q));
      s.row_slot.push_back(sq.cache->length() + static_cast<int32_t>(i));
    }
  }
  const int64_t E = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff;
  const int64_t n_pairs = c.rope_dim / 2;

  // Token embeddings: row tokens[i] of token_embd becomes the residual stream x[i] (times
  // sqrt(n_embd) for gemma, rounded to float first as llama.cpp does).
  const float embd_scale = std::sqrt(static_cast<float>(E));
  for (int64_t i = 0; i < k; ++i) {
    dequantize_row(w.token_embd, s.row_tokens[i], &s.x[i * E]);
    if (c.scale_embd) ops::scale(&s.x[i * E], embd_scale, E);
  }

  // RoPE angles, once per token (shared by every layer and head): from its own position. Local
  // (sliding-window) layers have their own frequencies.
  for (int64_t i = 0; i < k; ++i) {
    rope_angles(impl_->rope, s.row_positions[i], &s.rope_cos[i * n_pairs],
                &s.rope_sin[i * n_pairs]);
    if (c.sliding_window > 0) {
      rope_angles(impl_->rope_swa, s.row_positions[i], &s.rope_cos_swa[i * n_pairs],
                  &s.rope_sin_swa[i * n_pairs]);
    }
  }

  for (int32_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    // out += the LoRA adapters' products for this layer's matrix, at each row's scales.
    const auto adapt = [&](LoraTarget target, const float* x, int64_t n, float* out) {
      apply_lora(lora, s.row_lora_scales.data(), l, target, x, n, out, pool);
    };
    const bool local = c.is_local_layer(l);
    const std::vector<float>& rope_cos = local ? s.rope_cos_swa : s.rope_cos;
    const std::vector<float>& rope_sin = local ? s.rope_sin_swa : s.rope_sin;

    // Attention input: xn = RMSNorm(x) * attn_norm.
    per_token(pool, k, [&](int64_t i) {
      ops::rms_norm(&s.x[i * E], L.attn_norm.data(), E, c.rms_eps, &s.xn[i * E]);
    });

    // Q, K, V projections: one hand-off and one activation quantization for all three when
    // they share a type (mixed-type files fall back to one call each; same bits either way).
    matmul_same_input({{&L.wq, s.q.data()}, {&L.wk, s.kv_k.data()}, {&L.wv, s.kv_v.data()}},
                      s.xn.data(), k, pool);
    if (!lora.empty()) {
      adapt(LoraTarget::AttnQ, s.xn.data(), k, s.q.data());
      adapt(LoraTarget::AttnK, s.xn.data(), k, s.kv_k.data());
      adapt(LoraTarget::AttnV, s.xn.data(), k, s.kv_v.data());
    }

    // Biases (qwen2), per-head Q/K RMSNorm (gemma3), RoPE on Q and K at each token's position,
    // Q pre-scaling (gemma3), then K and V into the row's own cache at the row's slot.
    per_token(pool, k, [&](int64_t i) {
      float* q = &s.q[i * Q];
      float* kk = &s.kv_k[i * KV];
      float* vv = &s.kv_v[i * KV];
      if (c.qkv_bias) {
        ops::add(q, L.bq.data(), Q);
        ops::add(kk, L.bk.data(), KV);
        ops::add(vv, L.bv.data(), KV);
      }
      if (c.qk_norm) {
        const int64_t D = c.head_dim;
        for (int32_t h = 0; h < c.n_head; ++h) {
          ops::rms_norm(q + h * D, L.q_norm.data(), D, c.rms_eps, q + h * D);
        }
        for (int32_t h = 0; h < c.n_head_kv; ++h) {
          ops::rms_norm(kk + h * D, L.k_norm.data(), D, c.rms_eps, kk + h * D);
        }
      }
      const float* cs = &rope_cos[i * n_pairs];
      const float* sn = &rope_sin[i * n_pairs];
      apply_rope(c.rope_style, q, c.n_head, c.head_dim, c.rope_dim, cs, sn);
      apply_rope(c.rope_style, kk, c.n_head_kv, c.head_dim, c.rope_dim, cs, sn);
      if (c.scale_q) ops::scale(q, c.attn_scale, Q);
      KvCache& cache = *sequences[static_cast<size_t>(s.row_sequence[i])].cache;
      const int32_t slot = s.row_slot[i];
      for (int32_t h = 0; h < c.n_head_kv; ++h) {
        const int64_t D = c.head_dim;
        cache.store(l, h, slot, kk + h * D, vv + h * D);
      }
    });

    const float attn_scale = c.scale_q ? 1.0f : c.attn_scale;
    const int32_t window = local ? c.sliding_window : 0;
    // Rows that go on through this layer: all of them, except in the last layer, where only
    // the rows whose logits were asked for do. The others' K/V, now in the caches, is all they
    // leave behind, so a prefill chunk skips the last layer's attention, output projection and
    // feed-forward (1/n_layer of its work) for all its rows but one. Each row's values do not
    // depend on which other rows a pass holds, so the logits are the same bits.
    int64_t rows = k;
    if (l == c.n_layer - 1 && static_cast<int64_t>(s.logit_rows.size()) < k) {
      // The rows' LoRA scales follow them to the front, as their residual rows do (the logit
      // rows ascend, so none is overwritten before it moves).
      for (size_t j = 0; j < s.logit_rows.size() && !lora.empty(); ++j) {
        const size_t n = lora.size(), r = static_cast<size_t>(s.logit_rows[j]);
        std::copy_n(&s.row_lora_scales[r * n], n, &s.row_lora_scales[j * n]);
      }
      rows = last_layer_rows_only(c, sequences, l, attn_scale, window, s, pool);
    } else {
      // Causal attention, per sequence over its own cache: its token i over slots
      // [0, first_slot + i], or over the last sliding_window of them in a local layer.
      int64_t row0 = 0;
      for (const SequenceRows& sq : sequences) {
        const auto n = static_cast<int64_t>(sq.tokens.size());
        if (n > 0) {
          causal_attention(c, *sq.cache, l, sq.cache->length(), s.q.data() + row0 * Q, n,
                           s.attn.data() + row0 * Q, s, pool, attn_scale, window);
        }
        row0 += n;
      }
    }
    if (rows == 0) break;

    // Output projection and residual: x += attn_output(attn) (RMSNorm'd first with post-norms).
    matmul(L.wo, s.attn.data(), rows, s.proj.data(), pool);
    if (!lora.empty()) {
      adapt(LoraTarget::AttnOutput, s.attn.data(), rows, s.proj.data());
    }
    per_token(pool, rows, [&](int64_t i) {
      if (c.post_norms) {
        ops::rms_norm(&s.proj[i * E], L.post_attn_norm.data(), E, c.rms_eps, &s.proj[i * E]);
      }
      ops::add(&s.x[i * E], &s.proj[i * E], E);
      // FFN input: xn = RMSNorm(x) * ffn_norm.
      ops::rms_norm(&s.x[i * E], L.ffn_norm.data(), E, c.rms_eps, &s.xn[i * E]);
    });

    // Gated feed-forward: down(act(gate(xn)) * up(xn)) with SiLU (SwiGLU) or GELU (GeGLU),
    // then residual (RMSNorm'd first with post-norms).
    matmul_same_input({{&L.ffn_gate, s.gate.data()}, {&L.ffn_up, s.up.data()}}, s.xn.data(), rows,
                      pool);
    if (!lora.empty()) {
      adapt(LoraTarget::FfnGate, s.xn.data(), rows, s.gate.data());
      adapt(LoraTarget::FfnUp, s.xn.data(), rows, s.up.data());
    }
    per_token(pool, rows, [&](int64_t i) {
      if (c.ffn_act == FfnActivation::GeluTanh) {
        ops::geglu(&s.gate[i * F], &s.up[i * F], F);
      } else {
        ops::swiglu(&s.gate[i * F], &s.up[i * F], F);
      }
    });
    matmul(L.ffn_down, s.gate.data(), rows, s.proj.data(), pool);
    if (!lora.empty()) {
      adapt(LoraTarget::FfnDown, s.gate.data(), rows, s.proj.data());
    }
    per_token(pool, rows, [&](int64_t i) {
      if (c.post_norms) {
        ops::rms_norm(&s.proj[i * E], L.post_ffn_norm.data(), E, c.rms_eps, &s.proj[i * E]);
      }
      ops::add(&s.x[i * E], &s.proj[i * E], E);
    });
  }
  for (const SequenceRows& sq : sequences) {
    sq.cache->advance(static_cast<int32_t>(sq.tokens.size()));
  }

  // Logits, only for the requested rows: final RMSNorm of those rows (packed into xn), then
  // the output matrix (token_embd when tied), once per distinct vocabulary subset over the
  // rows of the sequences that use it. A group of one sequence writes straight to its
  // logits_out; a larger group shares one product, then each sequence gets its rows.
  if (s.logit_rows.empty()) return;
  // Sequences that asked for hidden states get their normalized rows and leave the head out.
  {
    size_t first = 0;  // where sequence q's rows start in s.logit_rows
    for (const SequenceRows& sq : sequences) {
      const size_t n_q = sq.logit_rows.size();
      if (sq.hidden_out != nullptr) {
        per_token(pool, static_cast<int64_t>(n_q), [&](int64_t j) {
          ops::rms_norm(&s.x[s.logit_rows[first + static_cast<size_t>(j)] * E],
                        w.output_norm.data(), E, c.rms_eps, sq.hidden_out + j * E);
        });
      }
      first += n_q;
    }
  }
  const auto heads = [&](size_t r) { return sequences[r].hidden_out == nullptr; };
  for (size_t q = 0; q < sequences.size(); ++q) {
    if (!heads(q)) continue;
    const VocabSubset* vocab = sequences[q].vocab;
    bool earlier = false;  // this subset's group ran with an earlier sequence
    for (size_t r = 0; r < q && !earlier; ++r) earlier = heads(r) && sequences[r].vocab == vocab;
    if (earlier) continue;
    // The group's logit rows (as rows of the whole pass), in sequence order.
    s.group_rows.clear();
    size_t members = 0, member = q;  // member: the last sequence with rows in the group
    size_t first = 0;                // where sequence r's rows start in s.logit_rows
    for (size_t r = 0; r < sequences.size(); ++r) {
      const size_t n_r = sequences[r].logit_rows.size();
      if (r >= q && heads(r) && sequences[r].vocab == vocab && n_r > 0) {
        const auto from = s.logit_rows.begin() + static_cast<std::ptrdiff_t>(first);
        s.group_rows.insert(s.group_rows.end(), from, from + static_cast<std::ptrdiff_t>(n_r));
        ++members;
        member = r;
      }
      first += n_r;
    }
    const auto n_out = static_cast<int64_t>(s.group_rows.size());
    if (n_out == 0) continue;
    per_token(pool, n_out, [&](int64_t j) {
      ops::rms_norm(&s.x[s.group_rows[j] * E], w.output_norm.data(), E, c.rms_eps, &s.xn[j * E]);
    });
    const int64_t width = vocab == nullptr ? w.output.rows : vocab->width();
    if (members == 1) {
      output_head(w.output, vocab, n_out, sequences[member].logits_out, s, pool);
      continue;
    }
    s.logits.resize(static_cast<size_t>(n_out * width));
    output_head(w.output, vocab, n_out, s.logits.data(), s, pool);
    int64_t j = 0;
    for (size_t r = q; r < sequences.size(); ++r) {
      if (!heads(r) || sequences[r].vocab != vocab) continue;
      const auto rows = static_cast<int64_t>(sequences[r].logit_rows.size());
      std::copy_n(s.logits.data() + j * width, rows * width, sequences[r].logits_out);
      j += rows;
    }
  }
}

}  // namespace specdec
