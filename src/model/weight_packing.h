// Row-interleaved copies of a model's matrices for the packed matmul kernels
// (tensor/packed_weights.h), made once at load. They cost as much memory as the packed matrices
// themselves (the mapped file stays the source for embedding lookups), and buy a verify pass
// over several tokens for little more than one token's weight traffic.
//
// On the way, a draft's matrices can be requantized into another block format and its output
// head cut to a subset of the vocabulary (ModelLoadOptions). A draft step streams every matrix
// once, so fewer bytes make it cheaper; speculative sampling is exact for any draft, so either
// changes speed and acceptance, never the output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "model/model.h"

namespace specdec {

struct ModelWeights;
struct WeightMatrix;

struct PackedStore {
  std::unique_ptr<uint8_t[]> packed;  // every matrix's packed copy, back to back
  size_t packed_size = 0;
  // Converted matrices' own rows, kept only where something still reads them: rows past the
  // last full group of 8, or every row when packing is disabled.
  std::vector<std::vector<uint8_t>> converted;
};

// Packs every packable matrix of w into store (replacing its contents) and points the matrices
// at their copies; the tied output projection is packed once. Returns the bytes used. Packing
// is skipped when the environment sets SPECDEC_NO_PACK to a value other than "0", which
// benchmarks use to measure the plain kernels (then conversions still happen, into
// store.converted, and 0 is returned). on_packed, if set, runs after each matrix that was bound
// to the file gets its copy, with the matrix's file rows marked packed (model/source_pages.h
// releases their mapped pages there, so that the process never holds every matrix twice, not
// even while loading).
//
// options.matrix_type / output_type: a matrix whose type differs is decoded and quantized again
// (row by row, no calibration), if its rows are whole blocks of that type (otherwise it keeps
// its own type). options.output_ids: the head keeps those rows only (validated by the caller).
// A converted matrix whose rows all lie in full groups of 8 keeps no rows of its own (data is
// null): matmul reads only the copy. Throws specdec::Error for a type the packed kernels do
// not read.
size_t pack_model_weights(ModelWeights& w, PackedStore& store, const ModelLoadOptions& options,
                          const std::function<void(const WeightMatrix&)>& on_packed = {});

}  // namespace specdec
