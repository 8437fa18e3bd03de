// Tokenizer fuzz target. Input: one flag byte, then (when bit 5 is set) two NUL-terminated
// fields that extend the vocabulary, then the text.
//   bits 0-2  the vocabulary (fuzz_support.h; 7 wraps to 0)
//   bit 3     add_special        bit 4  parse_special
//   bit 5     extend the vocabulary: field 1 is extra tokens, one per line, each a type digit
//             (0-6, tokenizer.h's TokenType) followed by the token text; field 2 is extra BPE
//             merges, one "left right" per line
// Checks: every id is in the vocabulary, BOS/EOS where asked for; with a built-in vocabulary
// and valid UTF-8 text, the ids spell the text back (control tokens by their text); the
// streaming decoder's output, over the encoded ids and over ids read from the raw input
// bytes, is always valid UTF-8 and equals the decoded bytes with ill-formed parts replaced.
#include <string>
#include <unordered_set>
#include <vector>

#include "common/error.h"
#include "fuzz_support.h"
#include "fuzz_targets.h"

namespace specdec::fuzz {
namespace {

constexpr size_t kMaxExtraTokens = 32;
constexpr size_t kMaxExtraMerges = 32;

std::vector<std::string_view> lines(std::string_view s, size_t max) {
  std::vector<std::string_view> out;
  while (!s.empty() && out.size() < max) {
    const size_t nl = s.find('\n');
    out.push_back(s.substr(0, nl));
    if (nl == std::string_view::npos) break;
    s.remove_prefix(nl + 1);
  }
  return out;
}

// What `ids` spell, control tokens included as their text (token_bytes drops them).
std::string spell(const Tokenizer& tok, const std::vector<int32_t>& ids, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) {
    const int32_t id = ids[i];
    out += tok.token_type(id) == kTokenControl ? tok.token_text(id) : tok.token_bytes(id);
  }
  return out;
}

// Streams `ids` through a StreamingDecoder and checks its output against the whole decode.
void check_streaming(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  StreamingDecoder dec(tok);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = dec.push(id);
    FUZZ_CHECK(is_valid_utf8(piece));
    FUZZ_CHECK(dec.pending() <= 3);
    streamed += piece;
  }
  const std::string tail = dec.finish();
  FUZZ_CHECK(is_valid_utf8(tail));
  FUZZ_CHECK(dec.pending() == 0);
  streamed += tail;
  const std::string whole = tok.decode(ids);
  FUZZ_CHECK(streamed == replace_invalid_utf8(whole));
}

}  // namespace

int fuzz_one_tokenizer(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const uint8_t flags = in.byte();
  const int which = (flags & 7) % kNumVocabs;
  const bool add_special = (flags & 8) != 0;
  const bool parse_special = (flags & 16) != 0;
  const bool extend = (flags & 32) != 0;

  Tokenizer tok = vocab_tokenizer(which);
  // Whether the ids must spell the text back (below): always for the built-in vocabularies.
  // An extension keeps that property when every byte still encodes as itself and every merge
  // yields a token: extra tokens only of normal type (or user-defined with valid UTF-8 text, in
  // BPE; SentencePiece puts a space prefix after those, as llama.cpp does), no '<' in
  // SentencePiece pieces (merging could reach a <0xXX> byte token's text), and every merge's
  // result in the vocabulary (llama.cpp drops the bytes of a merged piece that is no token).
  bool spells_back = true;
  if (extend) {
    VocabData d = vocab_data(which);
    const bool bpe = d.kind == VocabKind::Bpe;
    const std::string_view extra_tokens = in.field();
    const std::string_view extra_merges = in.field();
    for (std::string_view line : lines(extra_tokens, kMaxExtraTokens)) {
      if (line.empty()) continue;
      const std::string_view text = line.substr(1);
      const int32_t type = line[0] >= '0' && line[0] <= '6' ? line[0] - '0' : kTokenNormal;
      d.tokens.emplace_back(text);
      d.token_types.push_back(type);
      if (!d.scores.empty()) d.scores.push_back(-static_cast<float>(d.tokens.size()));
      const bool keeps =
          type == kTokenNormal || (bpe && type == kTokenUserDefined && is_valid_utf8(text));
      if (!keeps || (!bpe && text.find('<') != std::string_view::npos)) spells_back = false;
    }
    for (std::string_view line : lines(extra_merges, kMaxExtraMerges)) {
      d.merges.emplace_back(line);
    }
    if (bpe) {
      const std::unordered_set<std::string_view> texts(d.tokens.begin(), d.tokens.end());
      for (std::string_view m : d.merges) {
        const size_t sp = m.find(' ', 1);  // split as Tokenizer::from_vocab does
        if (sp == std::string_view::npos) continue;
        std::string joined(m.substr(0, sp));
        joined.append(m.substr(sp + 1));
        if (!texts.contains(joined)) spells_back = false;
      }
    }
    try {
      tok = Tokenizer::from_vocab(std::move(d));
    } catch (const Error& e) {
      note_refused("Tokenizer::from_vocab", e);
      return 0;  // an inconsistent vocabulary is refused, which is all it may do
    }
  }
  const std::string_view text = in.rest();
  const int32_t n_vocab = tok.n_vocab();

  const std::vector<int32_t> ids = tok.encode(text, add_special, parse_special);
  for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < n_vocab);
  size_t begin = 0, end = ids.size();
  if (add_special && tok.add_bos()) {
    FUZZ_CHECK(!ids.empty() && ids.front() == tok.bos());
    ++begin;
  }
  if (add_special && tok.add_eos()) {
    FUZZ_CHECK(end > begin && ids.back() == tok.eos());
    --end;
  }
  if (!add_special) FUZZ_CHECK(tok.encode(text, false, parse_special) == ids);  // deterministic

  // Round trip, where the vocabulary spells every byte (spells_back) and the text is valid
  // UTF-8 (the BPE pre-tokenizer turns invalid bytes into U+FFFD, as llama.cpp does).
  if (spells_back && is_valid_utf8(text)) {
    const std::string spelled = spell(tok, ids, begin, end);
    if (tok.kind() == VocabKind::Bpe) {
      FUZZ_CHECK(spelled == text);
    } else if (!parse_special) {
      // SentencePiece: spaces travel as U+2581 and come back as spaces (so does a U+2581 of the
      // text), and the first fragment gets the space prefix.
      std::string want = text.empty() || !tok.add_space_prefix() ? "" : " ";
      for (size_t i = 0; i < text.size(); ++i) {
        if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
          want += ' ';
          i += 2;
        } else {
          want += text[i];
        }
      }
      FUZZ_CHECK(spelled == want);
    }
  }

  check_streaming(tok, ids);

  // Arbitrary id sequences (what a model may generate): the raw input, two bytes per id.
  std::vector<int32_t> raw;
  for (size_t i = 0; i + 1 < size && raw.size() < 2048; i += 2) {
    raw.push_back(static_cast<int32_t>((data[i] | data[i + 1] << 8) % n_vocab));
  }
  for (int32_t id : raw) {
    tok.token_type(id);
    tok.token_score(id);
    tok.is_eog(id);
    FUZZ_CHECK(tok.find_token(tok.token_text(id)).has_value());
  }
  check_streaming(tok, raw);
  return 0;
}

}  // namespace specdec::fuzz
