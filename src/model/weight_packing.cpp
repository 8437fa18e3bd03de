#include "model/weight_packing.h"

#include <cstdlib>
#include <cstring>

#include "model/model_impl.h"
#include "tensor/packed_weights.h"

namespace specdec {
namespace {

bool packing_disabled() {
  const char* v = std::getenv("SPECDEC_NO_PACK");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

}  // namespace

size_t pack_model_weights(ModelWeights& w, std::vector<uint8_t>& store,
                          const std::function<void(const WeightMatrix&)>& on_packed) {
  store.clear();
  if (packing_disabled()) return 0;
  std::vector<WeightMatrix*> mats;
  for (LayerWeights& L : w.layers) {
    for (WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.ffn_gate, &L.ffn_up, &L.ffn_down}) {
      mats.push_back(m);
    }
  }
  mats.push_back(&w.output);  // token_embd is only read row by row, from the file

  // One allocation for all copies, so the pointers stay valid.
  size_t total = 0;
  for (const WeightMatrix* m : mats) total += packed_bytes(*m);
  store.resize(total);
  size_t offset = 0;
  for (WeightMatrix* m : mats) {
    const size_t n = packed_bytes(*m);
    if (n == 0) continue;
    pack_weights(*m, store.data() + offset);
    m->packed = store.data() + offset;
    if (on_packed) on_packed(*m);
    offset += n;
  }
  return total;
}

}  // namespace specdec
