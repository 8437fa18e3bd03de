// A 64-bit fingerprint of a GGUF file's content, cheap enough to take at any time: what a slot
// file (engine/slot_file.h) records of the model whose K/V it holds, so that a file written by
// another model (another quantization of the same one included: same shapes, other numbers) is
// refused instead of silently steering generation with the wrong keys.
#pragma once

#include <cstdint>

#include "gguf/gguf_file.h"

namespace specdec::gguf {

// Hashes the file's size, its header (metadata and tensor table: every byte before the first
// tensor's data) and up to 64 bytes at the start, middle and end of every tensor's data, about
// three pages per tensor. Two files that differ in their metadata, tensor names, shapes, types
// or offsets always differ here; files that differ only inside a tensor's data, away from those
// samples, do not (reading all of a 1 GB file to tell would take seconds).
uint64_t content_fingerprint(const GgufFile& file);

}  // namespace specdec::gguf
