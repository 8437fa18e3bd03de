// A draft model cut from the target itself: its first N transformer blocks plus its own final
// norm and output head ("early exit" self-speculation). It shares the target's vocabulary by
// construction, so it is the honest fallback when no smaller same-tokenizer model exists.
// Speculation stays lossless whatever the draft is; only the acceptance rate depends on it.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/gguf_file.h"

namespace specdec {

// Writes a GGUF holding the target's metadata (with block_count = n_layers and a new name) and
// every tensor except those of blocks >= n_layers. Throws specdec::Error if n_layers is not in
// [1, block_count) or the file cannot be written.
void write_layer_draft(const gguf::GgufFile& target, int32_t n_layers, const std::string& out_path);

}  // namespace specdec
