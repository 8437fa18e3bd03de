// UTF-8 encoding and llama.cpp's lenient decoding: shared by the tokenizers and the JSON Schema
// to grammar converter.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace specdec {

// Appends the UTF-8 encoding of `cp` (must be <= 0x10FFFF).
void append_utf8(std::string& out, uint32_t cp);

// Decodes `text` into code points the way llama.cpp does before BPE pre-tokenization: valid-
// looking sequences decode without overlong/surrogate checks, and each byte that cannot start
// a sequence becomes U+FFFD. Valid UTF-8 decodes exactly.
std::vector<uint32_t> lenient_codepoints(std::string_view text);

}  // namespace specdec
