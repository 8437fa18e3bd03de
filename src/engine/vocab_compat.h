// Speculative decoding compares p(y) and q(y) for the same token id, so draft and target must
// agree on what every id means. This check runs before any generation.
#pragma once

#include <string>

#include "tokenizer/tokenizer.h"

namespace specdec {

// Throws specdec::Error describing the first difference: vocabulary kind, special ids, size or the
// text of any token id both vocabularies share.
void check_vocab_compatible(const Tokenizer& draft, const Tokenizer& target);

}  // namespace specdec
