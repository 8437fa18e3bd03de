// After packing (weight_packing.h), the rows a packed copy covers are never read from the file
// mapping again: matmul takes them from the copy. Their mapped pages would otherwise stay in the
// process as a second full copy of those matrices (they were all read once, to pack them), so
// this hands them back to the kernel. What is still read from the mapping is kept: the token
// embedding (looked up row by row; with a tied output it is also the output matrix, so that
// matrix is kept whole) and each packed matrix's rows past its last full group of 8, and any
// page shared with such bytes or with a neighbouring tensor (only a range's whole interior
// pages go). With the file mapped, reading a released page again is still correct (it faults
// back in from the file), so a mistake here could only cost memory, never change a result. With
// the file read into memory (--no-mmap) the released pages are freed and made inaccessible, so
// a mistake would fault at once, never compute with lost bytes (the --no-mmap tests give the
// mapped run's text). (A fault on a kept page also
// maps the cached pages around it, the kernel's fault-around and, on 6.x kernels, the rest of a
// large page-cache folio: so released pages within a folio (up to 2 MiB) of kept ones can come
// back.)
#pragma once

#include <cstddef>

namespace specdec {

namespace gguf {
class GgufFile;
}
struct ModelWeights;

struct WeightMatrix;

// Releases the mapped pages of m's packed rows (m, one of w's matrices, already points at its
// packed copy), except those that overlap bytes still read from the mapping (above; a matrix of
// w that is not packed, or not yet, counts as read whole). Returns the bytes released. Called
// for each matrix as soon as it is packed, so that loading never holds all of them twice. Does
// nothing (returns 0) when SPECDEC_NO_RELEASE is set to a value other than "0", for comparisons.
size_t release_packed_source(const ModelWeights& w, const WeightMatrix& m,
                             const gguf::GgufFile& file);

}  // namespace specdec
