// GBNF grammar fuzz target (grammar/grammar.h, grammar/token_mask.h). Input: GBNF text, then
// optionally a NUL byte and a text to match; without a NUL, the last 32 bytes of the input are
// the text. The grammar (start symbol root) is compiled: it must compile or throw
// specdec::Error. When it compiles, the text (up to 64 bytes) is fed to a GrammarState both byte
// by byte and all at once (the same verdict, key, complete() and can_continue() both ways),
// and at up to 16 points along the way (states of at most 512 stacks) the token mask over a tiny
// vocabulary is computed and checked token by token against allows() (the trie walk and the direct
// check must agree; an end token exactly when complete()). The limits on ambiguity and work throw
// specdec::Error, which is an accepted outcome; anything else escapes and counts as a crash.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "fuzz_support.h"
#include "fuzz_targets.h"
#include "grammar/grammar.h"
#include "grammar/token_mask.h"

namespace specdec::fuzz {
namespace {

constexpr size_t kMaxText = 64;
constexpr size_t kTailText = 32;
constexpr int kMaxMasks = 16;
// Masks (a check per token) only for states this small: a hugely ambiguous grammar is still
// matched, just not checked token by token, so one input stays well under a second.
constexpr size_t kMaxMaskedStacks = 512;

const std::shared_ptr<const GrammarVocab>& tiny_vocab() {
  static const std::shared_ptr<const GrammarVocab> v = [] {
    std::vector<std::string> tokens = {
        "{",        "}",        "[",    "]",    "\"",    ":",        ",",
        " ",        "\n",       "a",    "b",    "x",     "0",        "1",
        "-",        ".",        "\\",   "true", "null",  "\"a\"",    "ab",
        "aaaaaaaa", "{\"",      "\":",  "\xC3", "\xA9",  "\xC3\xA9", "\xE2\x82\xAC",
        "\xF0\x9F", "\x98\x80", "\xE2", "",     "<end>", "(",        ")",
        "+",        "*"};
    const auto end = static_cast<int32_t>(tokens.size());
    tokens.push_back("<end>");
    return std::make_shared<const GrammarVocab>(std::move(tokens), std::vector<int32_t>{end});
  }();
  return v;
}

bool bit(std::span<const uint64_t> bits, int32_t t) {
  return ((bits[static_cast<size_t>(t) / 64] >> (static_cast<uint32_t>(t) % 64)) & 1) != 0;
}

// The mask of `s` against allows() for every token.
void check_mask(GrammarMasker& m, const GrammarState& s) {
  const std::span<const uint64_t> bits = m.allowed(s);
  const GrammarVocab& v = m.vocab();
  FUZZ_CHECK(bits.size() == (static_cast<size_t>(v.n_vocab()) + 63) / 64);
  for (int32_t t = 0; t < v.n_vocab(); ++t) {
    const bool allowed = bit(bits, t);
    FUZZ_CHECK(allowed == m.allows(s, t));
    if (v.is_end(t)) FUZZ_CHECK(allowed == s.complete());
    if (v.bytes(t).empty() && !v.is_end(t)) FUZZ_CHECK(!allowed);
    if (allowed && !v.is_end(t)) {
      GrammarState next = s;
      FUZZ_CHECK(m.advance(next, t));
      FUZZ_CHECK(!next.dead());
    }
  }
  if (s.dead()) {
    for (const uint64_t w : bits) FUZZ_CHECK(w == 0);
  }
}

}  // namespace

int fuzz_one_grammar(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view gbnf = input.substr(0, nul);
  std::string_view text = nul == std::string_view::npos
                              ? input.substr(input.size() - std::min(input.size(), kTailText))
                              : input.substr(nul + 1);
  text = text.substr(0, kMaxText);

  std::shared_ptr<const Grammar> grammar;
  try {
    grammar = Grammar::parse(gbnf);
  } catch (const Error& e) {
    FUZZ_CHECK(e.what()[0] != '\0');
    note_refused("Grammar::parse", e);
    return 0;
  }
  FUZZ_CHECK(grammar != nullptr);

  try {
    GrammarState whole(grammar);
    FUZZ_CHECK(!whole.dead());
    FUZZ_CHECK(whole.n_stacks() >= 1 && whole.n_stacks() <= GrammarState::kMaxStacks);
    GrammarState bytewise = whole;
    GrammarMasker masker(tiny_vocab(), 4);
    if (bytewise.n_stacks() <= kMaxMaskedStacks) check_mask(masker, bytewise);

    const bool ok = whole.accept(text);
    bool alive = true;
    int masks = 1;
    for (size_t i = 0; i < text.size(); ++i) {
      const bool step = bytewise.accept(text.substr(i, 1));
      FUZZ_CHECK(step == !bytewise.dead());
      if (!step) {
        alive = false;
        FUZZ_CHECK(!bytewise.accept(""));  // dead stays dead
        break;
      }
      FUZZ_CHECK(bytewise.n_stacks() <= GrammarState::kMaxStacks);
      if (masks < kMaxMasks && bytewise.n_stacks() <= kMaxMaskedStacks) {
        check_mask(masker, bytewise);
        ++masks;
      }
    }
    FUZZ_CHECK(ok == alive);
    if (ok) {
      FUZZ_CHECK(whole.key() == bytewise.key());
      FUZZ_CHECK(whole.complete() == bytewise.complete());
      FUZZ_CHECK(whole.can_continue() == bytewise.can_continue());
      FUZZ_CHECK(whole.n_stacks() == bytewise.n_stacks());
    } else {
      FUZZ_CHECK(whole.dead() && !whole.complete() && !whole.can_continue());
    }
  } catch (const Error& e) {
    note_refused("GrammarState/GrammarMasker", e);
  }
  return 0;
}

}  // namespace specdec::fuzz
