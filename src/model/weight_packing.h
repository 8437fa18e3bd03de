// Row-interleaved copies of a model's matrices for the packed matmul kernels
// (tensor/packed_weights.h), made once at load. They cost as much memory as the packed matrices
// themselves (the mapped file stays the source for embedding lookups), and buy a verify pass
// over several tokens for little more than one token's weight traffic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace specdec {

struct ModelWeights;
struct WeightMatrix;

// Packs every packable matrix of w into store (replacing its contents) and points the matrices
// at their copies; the tied output projection is packed once. Returns the bytes used. Packing
// is skipped (returns 0) when the environment sets SPECDEC_NO_PACK to a value other than "0",
// which benchmarks use to measure the plain kernels. on_packed, if set, runs after each matrix
// gets its copy (model/source_pages.h releases the matrix's mapped pages there, so that the
// process never holds every matrix twice, not even while loading).
size_t pack_model_weights(ModelWeights& w, std::vector<uint8_t>& store,
                          const std::function<void(const WeightMatrix&)>& on_packed = {});

}  // namespace specdec
