#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <list>
#include <span>

#include "common/error.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace specdec {

namespace {

// Token texts llama.cpp recognises when loading a vocab (llama-vocab.cpp), whatever their
// stored type: all of them are forced to control type. kEotTexts supplies a missing EOT id (first
// match in this order); kEogTexts and the FIM pad/repo/separator texts end generation.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>",      "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>", "<EOT>",      "_<EOT>",  "[EOT]",         "<end_of_utterance>"};
constexpr std::string_view kEogTexts[] = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<|return|>",
                                          "<|call|>",
                                          "<|flush|>",
                                          "<|calls|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "</s>",
                                          "<|eom_id|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "[EOT]",
                                          "[EOS]",
                                          "<|end_of_text|>",
                                          "<end_of_utterance>",
                                          "<eos>",
                                          "<turn|>",
                                          "<|tool_response>"};
constexpr std::string_view kFimEogTexts[] = {
    "<|fim_pad|>",   "<fim-pad>",  "<fim_pad>", "<PAD>",      "[PAD]",       "<|fim_repo|>",
    "<|repo_name|>", "<fim-repo>", "<REPO>",    "<reponame>", "<|file_sep|>"};
constexpr std::string_view kFimOtherTexts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "<|code_prefix|>", "<|prefix|>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "<|code_suffix|>", "<|suffix|>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "<|code_middle|>", "<|middle|>"};
// The repository-level FIM markers by their text (llama.cpp's spellings; all of them are also in
// kFimEogTexts).
constexpr std::string_view kFimRepoTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                              "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};
// gpt-oss: always rendered, so llama.cpp makes them user-defined.
constexpr std::string_view kForcedUserDefined[] = {"<|channel|>", "<|message|>", "<|start|>",
                                                   "<|constrain|>"};

bool is_special_type(int32_t t) {
  return t == kTokenControl || t == kTokenUserDefined || t == kTokenUnknown;
}

void check_id(const char* what, int32_t& id, size_t n, bool required) {
  if (id >= 0 && static_cast<size_t>(id) >= n) {
    if (required) fail("tokenizer: ", what, " token id ", id, " is outside the vocab (", n, ")");
    id = -1;
  }
}

// Fragments of the input during special-token partitioning: raw text or an already-decided token.
struct Fragment {
  int32_t token;  // -1 for raw text
  size_t begin, len;
};

}  // namespace

Tokenizer Tokenizer::from_vocab(VocabData data) {
  auto impl = std::make_shared<Impl>();
  const size_t n = data.tokens.size();
  if (n == 0) fail("tokenizer: the vocab has no tokens");
  if (n > static_cast<size_t>(INT32_MAX)) fail("tokenizer: the vocab is too large");
  if (data.token_types.empty()) data.token_types.assign(n, kTokenNormal);
  if (data.token_types.size() != n) {
    fail("tokenizer: ", data.token_types.size(), " token types for ", n, " tokens");
  }
  if (!data.scores.empty() && data.scores.size() != n) {
    fail("tokenizer: ", data.scores.size(), " scores for ", n, " tokens");
  }
  if (data.kind == VocabKind::Bpe && data.merges.empty())
    fail("tokenizer: BPE vocab has no merges");
  check_id("BOS", data.bos, n, data.add_bos);
  check_id("EOS", data.eos, n, data.add_eos);
  check_id("EOT", data.eot, n, false);
  check_id("unknown", data.unk, n, false);
  check_id("padding", data.pad, n, false);
  check_id("FIM prefix", data.fim_pre, n, false);
  check_id("FIM suffix", data.fim_suf, n, false);
  check_id("FIM middle", data.fim_mid, n, false);
  check_id("FIM repository", data.fim_rep, n, false);
  check_id("FIM file separator", data.fim_sep, n, false);
  if (data.add_bos && data.bos < 0) fail("tokenizer: add_bos is set but there is no BOS token");
  if (data.add_eos && data.eos < 0) fail("tokenizer: add_eos is set but there is no EOS token");

  impl->token_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) impl->token_to_id[data.tokens[i]] = static_cast<int32_t>(i);

  // Text-based special token detection, in llama.cpp's order.
  auto lookup = [&](std::string_view t) -> int32_t {
    auto it = impl->token_to_id.find(t);
    return it == impl->token_to_id.end() ? -1 : it->second;
  };
  auto force_control = [&](int32_t id) {
    if (id >= 0) data.token_types[id] = kTokenControl;
  };
  if (data.eot < 0) {
    for (auto t : kEotTexts) {
      if ((data.eot = lookup(t)) >= 0) break;
    }
  }
  force_control(data.eot);
  for (auto t : kFimOtherTexts) force_control(lookup(t));
  // The FIM markers the file does not name, by their text (llama.cpp's lists, in its order: six
  // spellings each of prefix, suffix and middle).
  constexpr size_t kFimSpellings = std::size(kFimOtherTexts) / 3;
  for (auto [id, group] : {std::pair{&data.fim_pre, 0}, {&data.fim_suf, 1}, {&data.fim_mid, 2}}) {
    for (size_t k = 0; *id < 0 && k < kFimSpellings; ++k) {
      *id = lookup(kFimOtherTexts[static_cast<size_t>(group) * kFimSpellings + k]);
    }
  }
  for (auto t : kFimRepoTexts) {
    if (data.fim_rep < 0) data.fim_rep = lookup(t);
  }
  for (auto t : kFimSepTexts) {
    if (data.fim_sep < 0) data.fim_sep = lookup(t);
  }
  force_control(lookup("<|eom_id|>"));
  std::vector<int32_t> eog;
  for (auto list : {std::span<const std::string_view>(kFimEogTexts),
                    std::span<const std::string_view>(kEogTexts)}) {
    for (auto t : list) {
      const int32_t id = lookup(t);
      force_control(id);
      if (id >= 0) eog.push_back(id);
    }
  }
  for (auto t : kForcedUserDefined) {
    if (const int32_t id = lookup(t); id >= 0) data.token_types[id] = kTokenUserDefined;
  }
  if (data.eos >= 0) eog.push_back(data.eos);
  if (data.eot >= 0) eog.push_back(data.eot);
  auto erase_eog = [&](std::string_view text, int32_t new_type) {
    const int32_t id = lookup(text);
    if (id < 0) return;
    eog.erase(std::remove(eog.begin(), eog.end(), id), eog.end());
    data.token_types[id] = new_type;
  };
  auto has = [&](std::string_view t) { return lookup(t) >= 0; };
  // llama.cpp's workarounds: harmony/solar-open use <|end|> as a non-final separator, and gemma4
  // uses </s> as text.
  if (has("<|end|>") && ((has("<|return|>") && (has("<|call|>") || has("<|calls|>"))) ||
                         ((has("<|call|>") || has("<|calls|>")) && has("<|flush|>")))) {
    erase_eog("<|end|>", kTokenUserDefined);
  }
  if (has("<|tool_response>") && has("</s>")) erase_eog("</s>", kTokenNormal);
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  impl->eog = std::move(eog);

  for (size_t i = 0; i < n; ++i) {
    if (is_special_type(data.token_types[i]))
      impl->special_tokens.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(
      impl->special_tokens.begin(), impl->special_tokens.end(),
      [&](int32_t a, int32_t b) { return data.tokens[a].size() > data.tokens[b].size(); });

  if (data.kind == VocabKind::Bpe) {
    impl->pre = std::make_unique<PreTokenizer>(data.pre);
    impl->bpe_ranks.reserve(data.merges.size());
    for (size_t i = 0; i < data.merges.size(); ++i) {
      const std::string& m = data.merges[i];
      // Split at the first space after the first character (a merge's left side may itself be
      // a space-like character); a merge without a separator never matches, as in llama.cpp.
      const size_t sp = m.find(' ', 1);
      if (sp == std::string::npos) continue;
      impl->bpe_ranks.emplace(
          merge_key(std::string_view(m).substr(0, sp), std::string_view(m).substr(sp + 1)),
          static_cast<int32_t>(i));
    }
  } else {
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      const char name[] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>', 0};
      auto id = impl->find(name);
      if (!id) id = impl->find(std::string_view(reinterpret_cast<const char*>(&b), 1));
      impl->byte_tokens[b] = id ? *id : -1;
    }
  }
  impl->data = std::move(data);
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  const Impl& im = *impl_;
  const VocabData& d = im.data;

  // Split out special tokens exactly as llama.cpp does: each special token in turn (longest
  // first) is searched for in every remaining raw fragment, so a longer token always wins over
  // a shorter one it overlaps. Without parse_special only user-defined tokens are split out.
  std::list<Fragment> frags;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  for (int32_t id : im.special_tokens) {
    const int32_t type = im.type(id);
    if (!parse_special && type != kTokenUserDefined) continue;
    const std::string& st = d.tokens[id];
    if (st.empty()) continue;
    for (auto it = frags.begin(); it != frags.end(); ++it) {
      if (it->token >= 0) continue;
      size_t begin = it->begin;
      const size_t end = it->begin + it->len;
      size_t pos = text.substr(0, end).find(st, begin);
      if (pos == std::string_view::npos) continue;
      // Replace this fragment by [text, token, text, token, ..., text].
      auto at = it;
      while (pos != std::string_view::npos) {
        if (pos > begin) frags.insert(at, {-1, begin, pos - begin});
        frags.insert(at, {id, 0, 0});
        begin = pos + st.size();
        pos = text.substr(0, end).find(st, begin);
      }
      if (begin < end) frags.insert(at, {-1, begin, end - begin});
      it = std::prev(frags.erase(at));
    }
  }

  std::vector<int32_t> out;
  if (d.kind == VocabKind::Bpe) {
    if (add_special && d.add_bos) out.push_back(d.bos);
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        out.push_back(f.token);
        continue;
      }
      for (const std::string& word : im.pre->split(text.substr(f.begin, f.len))) {
        std::string encoded;
        encoded.reserve(word.size() * 2);
        for (char c : word) encoded += unicode::byte_to_utf8(static_cast<uint8_t>(c));
        bpe_encode_word(im, encoded, out);
      }
    }
  } else {
    if (add_special && d.add_bos) out.push_back(d.bos);
    bool prev_special = true;  // the first raw fragment gets the space prefix
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        out.push_back(f.token);
        prev_special = true;
        continue;
      }
      std::string escaped;
      if (d.add_space_prefix && prev_special) escaped = "\xE2\x96\x81";
      for (char c : text.substr(f.begin, f.len)) {
        if (c == ' ') {
          escaped += "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK stands for a space
        } else {
          escaped += c;
        }
      }
      spm_encode(im, escaped, out);
      prev_special = false;
    }
  }
  if (add_special && d.add_eos) out.push_back(d.eos);
  return out;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  const Impl& im = *impl_;
  const std::string& text = token_text(id);
  switch (im.type(id)) {
    case kTokenUnknown:
    case kTokenUserDefined:
      return text;
    case kTokenNormal:
      break;
    case kTokenByte: {
      // SPM byte tokens are spelled <0xXX>; anything else carries no byte (as in llama.cpp,
      // which does not render byte-typed tokens of BPE vocabs).
      auto hex = [](char c) {
        return c >= '0' && c <= '9'   ? c - '0'
               : c >= 'A' && c <= 'F' ? c - 'A' + 10
               : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                      : -1;
      };
      if (im.data.kind == VocabKind::Spm && text.size() == 6 && text.starts_with("<0x") &&
          text[5] == '>' && hex(text[3]) >= 0 && hex(text[4]) >= 0) {
        return std::string(1, static_cast<char>(hex(text[3]) * 16 + hex(text[4])));
      }
      return {};
    }
    default:  // control, unused, undefined: not part of the visible text
      return {};
  }
  std::string out;
  if (im.data.kind == VocabKind::Spm) {
    for (size_t i = 0; i < text.size(); ++i) {
      if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
        out += ' ';
        i += 2;
      } else {
        out += text[i];
      }
    }
    return out;
  }
  for (uint32_t cp : unicode::lenient_codepoints(text)) {
    const int b = unicode::codepoint_to_byte(cp);
    if (b >= 0) {
      out += static_cast<char>(b);
    } else {
      unicode::append_utf8(out, cp);  // not a byte image: keep the character as it is
    }
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

const std::string& Tokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= n_vocab())
    fail("tokenizer: token id ", id, " is outside the vocab (", n_vocab(), ")");
  return impl_->data.tokens[static_cast<size_t>(id)];
}

int32_t Tokenizer::n_vocab() const { return static_cast<int32_t>(impl_->data.tokens.size()); }
int32_t Tokenizer::bos() const { return impl_->data.bos; }
int32_t Tokenizer::eos() const { return impl_->data.eos; }
int32_t Tokenizer::eot() const { return impl_->data.eot; }
int32_t Tokenizer::unk() const { return impl_->data.unk; }
int32_t Tokenizer::pad() const { return impl_->data.pad; }

std::optional<Tokenizer::FimTokens> Tokenizer::fim() const {
  const VocabData& d = impl_->data;
  if (d.fim_pre < 0 || d.fim_suf < 0 || d.fim_mid < 0) return std::nullopt;
  return FimTokens{d.fim_pre, d.fim_suf, d.fim_mid, d.fim_rep, d.fim_sep};
}

bool Tokenizer::is_eog(int32_t id) const {
  return std::binary_search(impl_->eog.begin(), impl_->eog.end(), id);
}
const std::vector<int32_t>& Tokenizer::eog_ids() const { return impl_->eog; }
bool Tokenizer::add_bos() const { return impl_->data.add_bos; }
bool Tokenizer::add_eos() const { return impl_->data.add_eos; }
bool Tokenizer::add_space_prefix() const { return impl_->data.add_space_prefix; }
VocabKind Tokenizer::kind() const { return impl_->data.kind; }
const std::string& Tokenizer::pre() const { return impl_->data.pre; }
int32_t Tokenizer::token_type(int32_t id) const {
  token_text(id);  // range check
  return impl_->type(id);
}
float Tokenizer::token_score(int32_t id) const {
  token_text(id);
  return impl_->data.scores.empty() ? 0.0f : impl_->data.scores[static_cast<size_t>(id)];
}
std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  return impl_->find(text);
}

}  // namespace specdec
