#include "engine/vocab_compat.h"

#include <algorithm>
#include <cstdlib>

#include "common/error.h"

namespace specdec {

void check_vocab_compatible(const Tokenizer& draft, const Tokenizer& target) {
  auto kind_name = [](VocabKind k) { return k == VocabKind::Bpe ? "BPE" : "SentencePiece"; };
  if (draft.kind() != target.kind()) {
    fail("draft and target vocabularies differ: the draft uses ", kind_name(draft.kind()),
         ", the target ", kind_name(target.kind()));
  }
  // p and q must be distributions over the same ids; padding tokens that only one side has
  // would make q put mass where p cannot, so sizes must match exactly.
  if (draft.n_vocab() != target.n_vocab()) {
    fail("draft and target vocabularies differ: the draft has ", draft.n_vocab(),
         " tokens, the target ", target.n_vocab());
  }
  if (draft.bos() != target.bos() || draft.eos() != target.eos()) {
    fail("draft and target vocabularies differ: special ids bos/eos are ", draft.bos(), "/",
         draft.eos(), " in the draft but ", target.bos(), "/", target.eos(), " in the target");
  }
  const int32_t shared = std::min(draft.n_vocab(), target.n_vocab());
  for (int32_t id = 0; id < shared; ++id) {
    if (draft.token_text(id) != target.token_text(id)) {
      fail("draft and target vocabularies differ: token ", id, " is '", draft.token_text(id),
           "' in the draft but '", target.token_text(id), "' in the target");
    }
  }
}

}  // namespace specdec
