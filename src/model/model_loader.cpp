// Model::load: binds every tensor of the file to the model's weights (matrices stay in the
// mapping; small vectors are dequantized to float), checking presence, shape and type.
#include <string>

#include "common/error.h"
#include "model/model.h"
#include "model/model_impl.h"
#include "model/rope.h"
#include "model/source_pages.h"
#include "model/weight_packing.h"

namespace specdec {
namespace {

std::string shape_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

class Binder {
 public:
  explicit Binder(const gguf::GgufFile& f) : f_(f) {}
  size_t bytes() const { return bytes_; }

  const gguf::TensorInfo* find(const std::string& name) const { return f_.find_tensor(name); }

  // A rows x cols matrix: GGUF dims [cols, rows] (trailing 1s allowed).
  WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols) {
    const gguf::TensorInfo& t = require(name);
    check_shape(t, {cols, rows});
    const TypeTraits& tt = check_type(t);
    if (cols % tt.block_size != 0) {
      fail(f_.path(), ": tensor '", name, "' row length ", cols, " is not a multiple of the ",
           tt.name, " block size ", tt.block_size);
    }
    WeightMatrix w{t.type, rows, cols, t.data, row_bytes(t.type, cols)};
    if (t.n_bytes < w.row_stride * static_cast<size_t>(rows)) {
      fail(f_.path(), ": tensor '", name, "' data is shorter than its shape");
    }
    bytes_ += t.n_bytes;
    return w;
  }

  // A vector of n values, dequantized to float (norms and biases are tiny; F16/BF16 copies of
  // them exist in some files).
  std::vector<float> vector(const std::string& name, int64_t n) {
    const gguf::TensorInfo& t = require(name);
    check_shape(t, {n});
    const TypeTraits& tt = check_type(t);
    if (n % tt.block_size != 0) {
      fail(f_.path(), ": tensor '", name, "' length ", n, " is not a multiple of the ", tt.name,
           " block size ", tt.block_size);
    }
    WeightMatrix w{t.type, 1, n, t.data, row_bytes(t.type, n)};
    if (t.n_bytes < w.row_stride) fail(f_.path(), ": tensor '", name, "' data is too short");
    std::vector<float> out(static_cast<size_t>(n));
    dequantize_row(w, 0, out.data());
    bytes_ += t.n_bytes;
    return out;
  }

 private:
  const gguf::TensorInfo& require(const std::string& name) const {
    const gguf::TensorInfo* t = f_.find_tensor(name);
    if (!t) fail(f_.path(), ": missing tensor '", name, "'");
    return *t;
  }
  void check_shape(const gguf::TensorInfo& t, const std::vector<int64_t>& want) const {
    bool ok = t.dims.size() >= want.size();
    for (size_t i = 0; ok && i < t.dims.size(); ++i) {
      ok = t.dims[i] == (i < want.size() ? want[i] : 1);
    }
    if (!ok) {
      fail(f_.path(), ": tensor '", t.name, "' has shape ", shape_str(t.dims), ", expected ",
           shape_str(want));
    }
  }
  const TypeTraits& check_type(const gguf::TensorInfo& t) const {
    const TypeTraits& tt = traits(t.type);
    if (!tt.supported) {
      fail(f_.path(), ": tensor '", t.name, "' has unsupported type ", tt.name);
    }
    return tt;
  }
  const gguf::GgufFile& f_;
  size_t bytes_ = 0;
};

}  // namespace

std::unique_ptr<Model> Model::load(const gguf::GgufFile& file, const ModelLoadOptions& options) {
  std::unique_ptr<Model> model(new Model());
  ModelConfig& c = model->config_;
  c = ModelConfig::from_gguf(file);
  auto impl = std::make_shared<Impl>();
  ModelWeights& w = impl->weights;
  Binder b(file);

  w.token_embd = b.matrix("token_embd.weight", c.n_vocab, c.n_embd);
  w.output_norm = b.vector("output_norm.weight", c.n_embd);
  w.output = c.tied_output ? w.token_embd : b.matrix("output.weight", c.n_vocab, c.n_embd);

  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int32_t l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    L.attn_norm = b.vector(p + "attn_norm.weight", c.n_embd);
    L.wq = b.matrix(p + "attn_q.weight", c.q_dim(), c.n_embd);
    L.wk = b.matrix(p + "attn_k.weight", c.kv_dim(), c.n_embd);
    L.wv = b.matrix(p + "attn_v.weight", c.kv_dim(), c.n_embd);
    if (c.qkv_bias) {
      L.bq = b.vector(p + "attn_q.bias", c.q_dim());
      L.bk = b.vector(p + "attn_k.bias", c.kv_dim());
      L.bv = b.vector(p + "attn_v.bias", c.kv_dim());
    }
    if (c.qk_norm) {
      L.q_norm = b.vector(p + "attn_q_norm.weight", c.head_dim);
      L.k_norm = b.vector(p + "attn_k_norm.weight", c.head_dim);
    }
    L.wo = b.matrix(p + "attn_output.weight", c.n_embd, c.q_dim());
    if (c.post_norms) L.post_attn_norm = b.vector(p + "post_attention_norm.weight", c.n_embd);
    L.ffn_norm = b.vector(p + "ffn_norm.weight", c.n_embd);
    L.ffn_gate = b.matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd);
    L.ffn_up = b.matrix(p + "ffn_up.weight", c.n_ff, c.n_embd);
    L.ffn_down = b.matrix(p + "ffn_down.weight", c.n_embd, c.n_ff);
    if (c.post_norms) L.post_ffn_norm = b.vector(p + "post_ffw_norm.weight", c.n_embd);
  }

  // Llama 3.1+ files carry their long-context frequency scaling as per-pair divisors.
  std::vector<float> freq_factors;
  if (b.find("rope_freqs.weight")) freq_factors = b.vector("rope_freqs.weight", c.rope_dim / 2);
  impl->rope = rope_freqs(c, freq_factors);
  if (c.sliding_window > 0) {
    // Local layers rotate with their own base and without any long-context scaling (llama.cpp's
    // rope_freq_base_train_swa / rope_freq_scale_train_swa).
    ModelConfig local = c;
    local.rope_theta = c.rope_theta_swa;
    local.rope_freq_scale = 1.0f;
    impl->rope_swa = rope_freqs(local, {});
  }

  if (!options.output_ids.empty()) {
    std::vector<bool> seen(static_cast<size_t>(c.n_vocab), false);
    bool identity = static_cast<int32_t>(options.output_ids.size()) == c.n_vocab;
    for (size_t i = 0; i < options.output_ids.size(); ++i) {
      const int32_t id = options.output_ids[i];
      if (id < 0 || id >= c.n_vocab || seen[static_cast<size_t>(id)]) {
        fail("output head rows: ids must be unique and in [0, ", c.n_vocab, "), got ", id, " at ",
             i);
      }
      seen[static_cast<size_t>(id)] = true;
      identity = identity && id == static_cast<int32_t>(i);
    }
    if (!identity) model->output_ids_ = options.output_ids;
  }
  ModelLoadOptions layout = options;
  layout.output_ids = model->output_ids_;  // every id in id order is the plain head

  model->weight_bytes_ = b.bytes();
  const auto table_bytes = [](const WeightMatrix& m) {
    return m.row_stride * static_cast<size_t>(m.rows);
  };
  model->decode_weight_bytes_ = b.bytes() - table_bytes(w.token_embd) -
                                (c.tied_output ? 0 : table_bytes(w.output)) +
                                w.output.row_stride * static_cast<size_t>(model->head_rows());
  // Each matrix's mapped pages go as soon as its copy is made (model/source_pages.h).
  size_t released = 0;
  model->packed_weight_bytes_ = pack_model_weights(
      w, impl->packed, layout,
      [&](const WeightMatrix& m) { released += release_packed_source(w, m, file); });
  model->released_weight_bytes_ = released;
  model->impl_ = std::move(impl);
  return model;
}

}  // namespace specdec
