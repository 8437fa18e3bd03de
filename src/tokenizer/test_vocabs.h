// Small hand-made vocabularies for exact unit tests (no downloads).
#pragma once

#include "tokenizer/tokenizer.h"

namespace specdec::testvocab {

// Byte-level BPE: <|endoftext|>=0, <|im_start|>=1, <|im_end|>=2, <tool> (user-defined)=3, the
// 256 GPT-2 byte characters in byte order (ids 4..259), then the merge results listed in
// kBpeMerges order (ids 260..).
VocabData bpe(const std::string& pre = "gpt2");
inline constexpr int32_t kBpeByteBase = 4;

// SentencePiece: <unk>=0 (unknown), <s>=1, </s>=2 (control), <0x00>..<0xFF> (ids 3..258, byte),
// then scored pieces (ids 259..), see test_vocabs.cpp.
VocabData spm();
inline constexpr int32_t kSpmByteBase = 3;

}  // namespace specdec::testvocab
