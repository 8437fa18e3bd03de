#include "model/lora.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_fingerprint.h"
#include "model/model_impl.h"
#include "tensor/dequant.h"
#include "tensor/thread_pool.h"
#include "tensor/vec_ops.h"

namespace specdec {
namespace {

// The output chunk apply_lora works in (a multiple of every SIMD width).
constexpr int64_t kChunk = 256;

constexpr std::array<std::string_view, kLoraTargets> kTargetNames = {
    "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s;
}

// A tensor of the pair as floats, row after row.
std::vector<float> read_floats(const gguf::TensorInfo& t, const std::string& path) {
  if (!traits(t.type).supported || t.row_length() % traits(t.type).block_size != 0) {
    fail(path, ": LoRA tensor ", t.name, " has type ", type_name(t.type), ", which cannot be read");
  }
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  const size_t stride = row_bytes(t.type, t.row_length());
  for (int64_t r = 0; r < t.n_rows(); ++r) {
    dequantize_row(t.type, t.data + static_cast<size_t>(r) * stride,
                   out.data() + static_cast<size_t>(r * t.row_length()), t.row_length());
  }
  for (float v : out) {
    if (!std::isfinite(v))
      fail(path, ": LoRA tensor ", t.name, " holds a value that is not finite");
  }
  return out;
}

// The (n_in, n_out) of a block matrix of the model.
std::pair<int32_t, int32_t> matrix_shape(const ModelConfig& c, int target) {
  switch (static_cast<LoraTarget>(target)) {
    case LoraTarget::AttnQ:
      return {c.n_embd, c.q_dim()};
    case LoraTarget::AttnK:
    case LoraTarget::AttnV:
      return {c.n_embd, c.kv_dim()};
    case LoraTarget::AttnOutput:
      return {c.q_dim(), c.n_embd};
    case LoraTarget::FfnGate:
    case LoraTarget::FfnUp:
      return {c.n_embd, c.n_ff};
    case LoraTarget::FfnDown:
      return {c.n_ff, c.n_embd};
  }
  return {0, 0};
}

}  // namespace

int32_t LoraAdapter::pairs() const {
  int32_t n = 0;
  for (const auto& layer : layers) {
    for (const LoraMatrix& m : layer) n += m.rank > 0 ? 1 : 0;
  }
  return n;
}

std::shared_ptr<const LoraAdapter> load_lora_adapter(const std::string& path,
                                                     const ModelConfig& config) {
  const std::unique_ptr<gguf::GgufFile> file = gguf::GgufFile::open(path);
  const std::string type = file->get_string_or("general.type", "");
  const std::string adapter_type = file->get_string_or("adapter.type", "");
  if (type != "adapter" || adapter_type != "lora") {
    fail(path, ": not a LoRA adapter (general.type '", type, "', adapter.type '", adapter_type,
         "'; expected 'adapter' and 'lora', as llama.cpp's convert_lora_to_gguf.py writes)");
  }
  const std::string arch = file->get_string_or("general.architecture", "");
  if (arch != config.arch) {
    fail(path, ": a LoRA adapter for architecture '", arch, "', not the model's '", config.arch,
         "'");
  }
  auto adapter = std::make_shared<LoraAdapter>();
  adapter->path = path;
  adapter->alpha = static_cast<float>(file->get_float_or("adapter.lora.alpha", 0.0));
  if (!std::isfinite(adapter->alpha)) fail(path, ": adapter.lora.alpha is not finite");
  adapter->fingerprint = gguf::content_fingerprint(*file);
  adapter->layers.resize(static_cast<size_t>(config.n_layer));

  for (const gguf::TensorInfo& t : file->tensors()) {
    const std::string_view name = t.name;
    const bool is_a = name.ends_with(".lora_a"), is_b = name.ends_with(".lora_b");
    if (!is_a && !is_b) fail(path, ": tensor ", t.name, " is not half of a LoRA pair");
    const std::string base(name.substr(0, name.size() - 7));
    // "blk.<layer>.<target>.weight"
    int32_t layer = -1, target = -1;
    if (base.starts_with("blk.") && base.ends_with(".weight")) {
      const std::string_view rest = std::string_view(base).substr(4, base.size() - 4 - 7);
      const size_t dot = rest.find('.');
      if (dot != std::string_view::npos) {
        int64_t l = 0;
        bool digits = dot > 0 && dot <= 6;
        for (char ch : rest.substr(0, dot)) {
          digits = digits && ch >= '0' && ch <= '9';
          l = l * 10 + (ch - '0');
        }
        for (int i = 0; i < kLoraTargets && digits; ++i) {
          if (rest.substr(dot + 1) == kTargetNames[static_cast<size_t>(i)]) target = i;
        }
        if (digits) layer = static_cast<int32_t>(l);
      }
    }
    if (target < 0) {
      fail(path, ": LoRA tensor ", t.name,
           " adapts a matrix specdec does not apply adapters to (it applies them to the blocks' "
           "attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up and ffn_down)");
    }
    if (layer >= config.n_layer) {
      fail(path, ": LoRA tensor ", t.name, " is for layer ", layer, "; the model has ",
           config.n_layer);
    }
    if (!is_a) continue;  // each pair is read from its A
    const gguf::TensorInfo* b = file->find_tensor(base + ".lora_b");
    if (b == nullptr) fail(path, ": LoRA tensor ", t.name, " has no ", base, ".lora_b");
    const auto [n_in, n_out] = matrix_shape(config, target);
    // ggml's shapes: A is [n_in, rank] (rank rows of n_in), B is [rank, n_out].
    if (t.dims.size() != 2 || b->dims.size() != 2 || t.dims[0] != n_in || b->dims[1] != n_out ||
        t.dims[1] != b->dims[0] || t.dims[1] < 1 || t.dims[1] > n_in) {
      fail(path, ": LoRA pair ", base, " has shapes A [", dims_text(t.dims), "] and B [",
           dims_text(b->dims), "]; the model's matrix needs A [", n_in, ", rank] and B [rank, ",
           n_out, "]");
    }
    LoraMatrix& m = adapter->layers[static_cast<size_t>(layer)][static_cast<size_t>(target)];
    m.rank = static_cast<int32_t>(t.dims[1]);
    m.n_in = n_in;
    m.n_out = n_out;
    m.a = read_floats(t, path);
    const std::vector<float> b_rows = read_floats(*b, path);  // n_out rows of rank
    m.bt.resize(static_cast<size_t>(m.rank) * static_cast<size_t>(n_out));
    for (int32_t o = 0; o < n_out; ++o) {
      for (int32_t j = 0; j < m.rank; ++j) {
        m.bt[static_cast<size_t>(j) * static_cast<size_t>(n_out) + static_cast<size_t>(o)] =
            b_rows[static_cast<size_t>(o) * static_cast<size_t>(m.rank) + static_cast<size_t>(j)];
      }
    }
  }
  if (adapter->pairs() == 0) fail(path, ": the LoRA adapter holds no tensor pairs");
  return adapter;
}

void apply_lora(std::span<const ActiveLora> adapters, const float* row_scales, int32_t layer,
                LoraTarget target, const float* x, int64_t rows, float* out, ThreadPool& pool) {
  // B (A x) goes over the outputs in fixed chunks: every output element is computed by the same
  // kernel calls at the same offset in its chunk whether a row is alone (its chunks spread over
  // the threads) or one of many (each row on one thread, its chunks in order), so the bits do
  // not depend on the pass or the thread count.
  const auto t = static_cast<size_t>(target);
  const size_t n_adapters = adapters.size();
  for (size_t a = 0; a < n_adapters; ++a) {
    const LoraAdapter& adapter = *adapters[a].adapter;
    const LoraMatrix& m = adapter.layers[static_cast<size_t>(layer)][t];
    if (m.rank == 0) continue;
    const auto scale_of = [row_scales, n_adapters, a](int64_t i) {
      return row_scales[static_cast<size_t>(i) * n_adapters + a];
    };
    bool any = false;
    for (int64_t i = 0; i < rows && !any; ++i) any = scale_of(i) != 0.0f;
    if (!any) continue;
    const int64_t chunks = (m.n_out + kChunk - 1) / kChunk;
    // Row i's A x into ax (rank floats).
    const auto project = [&m, x](int64_t i, float* ax) {
      for (int32_t j = 0; j < m.rank; ++j) {
        ax[j] = dot_f32(&m.a[static_cast<size_t>(j) * m.n_in], x + i * m.n_in, m.n_in);
      }
    };
    // out[i][chunk] += factor * (B ax)[chunk].
    const auto expand = [&m, out](int64_t i, const float* ax, float factor, int64_t c) {
      const int64_t begin = c * kChunk, len = std::min<int64_t>(kChunk, m.n_out - begin);
      float delta[kChunk] = {};
      for (int32_t j = 0; j < m.rank; ++j) {
        axpy_f32(ax[j], &m.bt[static_cast<size_t>(j) * m.n_out + begin], delta, len);
      }
      axpy_f32(factor, delta, out + i * m.n_out + begin, len);
    };
    if (rows == 1) {
      thread_local std::vector<float> ax;
      ax.resize(static_cast<size_t>(m.rank));
      project(0, ax.data());
      const float* projected = ax.data();
      const float factor = adapter.factor(m, scale_of(0));
      pool.parallel_for(chunks, [&expand, projected, factor](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) expand(0, projected, factor, c);
      });
      continue;
    }
    pool.parallel_for(rows, [&](int64_t begin, int64_t end) {
      thread_local std::vector<float> ax;
      ax.resize(static_cast<size_t>(m.rank));
      for (int64_t i = begin; i < end; ++i) {
        const float scale = scale_of(i);
        if (scale == 0.0f) continue;
        const float factor = adapter.factor(m, scale);
        project(i, ax.data());
        for (int64_t c = 0; c < chunks; ++c) expand(i, ax.data(), factor, c);
      }
    });
  }
}

void add_lora_files(Model& model, std::span<const std::pair<std::string, float>> files) {
  if (files.empty()) return;
  const std::span<const ActiveLora> loaded = model.lora();
  std::vector<ActiveLora> active(loaded.begin(), loaded.end());
  for (const auto& [path, scale] : files) {
    active.push_back({load_lora_adapter(path, model.config()), scale});
  }
  model.set_lora(active);
}

void Model::set_lora(std::span<const ActiveLora> adapters) {
  for (const ActiveLora& a : adapters) {
    if (a.adapter == nullptr || a.adapter->layers.size() != static_cast<size_t>(config_.n_layer)) {
      fail("a LoRA adapter read for another model shape");
    }
    if (!std::isfinite(a.scale)) fail(a.adapter->path, ": LoRA scale is not finite");
    for (const auto& layer : a.adapter->layers) {
      for (int t = 0; t < kLoraTargets; ++t) {
        const LoraMatrix& m = layer[static_cast<size_t>(t)];
        if (m.rank > 0 && std::pair(m.n_in, m.n_out) != matrix_shape(config_, t)) {
          fail(a.adapter->path, ": a LoRA adapter read for another model shape");
        }
      }
    }
  }
  impl_->lora.assign(adapters.begin(), adapters.end());
}

std::span<const ActiveLora> Model::lora() const { return impl_->lora; }

void check_lora_scales(std::span<const ActiveLora> adapters, std::span<const float> scales) {
  if (scales.size() != adapters.size()) {
    fail("LoRA scales: ", scales.size(), " given for the target's ", adapters.size(), " adapters");
  }
  for (float scale : scales) {
    if (!std::isfinite(scale)) fail("LoRA scales: ", scale, " is not a finite number");
  }
}

uint64_t lora_fingerprint(std::span<const ActiveLora> adapters, std::span<const float> scales) {
  if (adapters.empty()) return 0;
  if (scales.size() != adapters.size()) {
    fail("LoRA scales: ", scales.size(), " given for ", adapters.size(), " adapters");
  }
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t a = 0; a < adapters.size(); ++a) {
    // FNV-1a over each adapter's fingerprint and its scale's bits, in order.
    uint32_t bits = 0;
    std::memcpy(&bits, &scales[a], sizeof bits);
    for (uint64_t v : {adapters[a].adapter->fingerprint, static_cast<uint64_t>(bits)}) {
      for (int i = 0; i < 8; ++i) {
        h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
      }
    }
  }
  return h == 0 ? 1 : h;
}

uint64_t Model::lora_fingerprint() const {
  std::vector<float> scales;
  for (const ActiveLora& a : impl_->lora) scales.push_back(a.scale);
  return specdec::lora_fingerprint(impl_->lora, scales);
}

}  // namespace specdec
