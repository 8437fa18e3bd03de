#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "common/error.h"
#include "tokenizer/unicode.h"

namespace specdec {

namespace {

// llama.cpp's notion of whitespace is the Unicode White_Space property (it includes U+0085,
// which PCRE2's UCP \s does not), so \s and \S are spelled out explicitly.
constexpr std::string_view kWhitespace =
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}";

// Rewrites \s / \S (inside or outside a character class) into explicit classes.
std::string expand_whitespace(std::string_view re) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < re.size(); ++i) {
    const char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      const char e = re[i + 1];
      if (e == 's') {
        out += in_class ? std::string(kWhitespace) : str_cat("[", kWhitespace, "]");
      } else if (e == 'S') {
        if (in_class) fail("pre-tokenizer regex: \\S inside a class is not supported");
        out += str_cat("[^", kWhitespace, "]");
      } else {
        out += c;
        out += e;
      }
      ++i;
      continue;
    }
    if (c == '[' && !in_class)
      in_class = true;
    else if (c == ']' && in_class)
      in_class = false;
    out += c;
  }
  return out;
}

// The regexes below are the ones llama.cpp uses (llama-vocab.cpp) for these pre types.
constexpr std::string_view kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr std::string_view kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

}  // namespace

std::vector<std::string> PreTokenizer::regexes_for(const std::string& pre, bool* ignore_merges) {
  std::vector<std::string_view> raw;
  bool ignore = false;
  if (pre.empty() || pre == "default") {
    raw = {"[\\p{P}\\$\\+<=>\\^`\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
  } else if (pre == "gpt2" || pre == "gpt-2") {
    raw = {kGpt2};
  } else if (pre == "smollm" || pre == "starcoder" || pre == "refact") {
    raw = {"\\p{N}", kGpt2};
  } else if (pre == "llama3" || pre == "llama-bpe" || pre == "llama-v3") {
    raw = {kLlama3};
    ignore = true;
  } else if (pre == "qwen2" || pre == "deepseek-r1-qwen") {
    raw = {kQwen2};
  } else {
    fail("unsupported BPE pre-tokenizer '", pre, "'");
  }
  if (ignore_merges) *ignore_merges = ignore;
  std::vector<std::string> out;
  for (auto r : raw) out.push_back(expand_whitespace(r));
  return out;
}

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(const std::string& pre) {
  for (const auto& re : regexes_for(pre, &ignore_merges_)) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    auto c = std::make_unique<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re.data()), re.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &err_off, nullptr);
    if (c->code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      fail("pre-tokenizer regex failed to compile at ", err_off, ": ",
           reinterpret_cast<char*>(msg));
    }
    // JIT is an optimisation only; the interpreter gives identical matches if it is unavailable.
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);
    regexes_.push_back(std::move(c));
  }
}

PreTokenizer::~PreTokenizer() = default;

namespace {

// What PCRE2 is shown in place of `cp`. ASCII and whitespace as they are (the regexes name them
// or list them in kWhitespace); any other code point as one fixed representative of its class
// in llama.cpp's tables, so that \p{L}, \p{N} and \p{P} match what they match in llama.cpp,
// whatever Unicode version the installed PCRE2 has (Debian 12's knows 5,010 of llama.cpp's
// letters and digits as neither, e.g. CJK Extension I). llama.cpp's own regex fallback
// collapses code points to classes the same way. Surrogates and out-of-range values are Other.
uint32_t regex_stand_in(uint32_t cp) {
  if (cp < 0x80 || unicode::is_whitespace(cp)) return cp;
  switch (unicode::char_class(cp)) {
    case unicode::CharClass::Letter:
      return 0x4E00;  // CJK ideograph "one" (Lo in every Unicode version)
    case unicode::CharClass::Number:
      return 0x0660;  // Arabic-Indic digit zero (Nd)
    case unicode::CharClass::Punctuation:
      return 0x00A1;  // inverted exclamation mark (Po)
    case unicode::CharClass::Other:
      break;
  }
  return 0xFFFD;  // replacement character (So)
}

}  // namespace

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  // Two parallel renderings of the code points: `subject` is valid UTF-8 for PCRE2, made of
  // regex stand-ins (above), and `cp_offset` maps each code point to its subject byte offset.
  const std::vector<uint32_t> cps = unicode::lenient_codepoints(text);
  std::string subject;
  subject.reserve(text.size() + 8);
  std::vector<size_t> cp_offset(cps.size() + 1);
  for (size_t i = 0; i < cps.size(); ++i) {
    cp_offset[i] = subject.size();
    unicode::append_utf8(subject, regex_stand_in(cps[i]));
  }
  cp_offset[cps.size()] = subject.size();

  // Chunks are byte ranges of `subject`; boundaries always fall on code point starts.
  std::vector<std::pair<size_t, size_t>> chunks;
  if (!subject.empty()) chunks.emplace_back(0, subject.size());
  pcre2_match_data* md = nullptr;
  for (const auto& re : regexes_) {
    md = md ? md : pcre2_match_data_create(4, nullptr);
    std::vector<std::pair<size_t, size_t>> next;
    for (const auto& [begin, end] : chunks) {
      const auto* sub = reinterpret_cast<PCRE2_SPTR>(subject.data() + begin);
      const size_t len = end - begin;
      size_t pos = 0;  // relative to begin
      size_t last = 0;
      while (pos <= len) {
        const int rc = pcre2_match(re->code, sub, len, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t ms = ov[0], me = ov[1];
        if (me == ms) {  // the regexes cannot match empty, but never loop forever if one does
          pos = ms + 1;
          while (pos < len && (subject[begin + pos] & 0xC0) == 0x80) ++pos;
          continue;
        }
        if (ms > last) next.emplace_back(begin + last, begin + ms);
        next.emplace_back(begin + ms, begin + me);
        last = pos = me;
      }
      if (last < len) next.emplace_back(begin + last, end);
    }
    chunks = std::move(next);
  }
  if (md) pcre2_match_data_free(md);

  // Rebuild each word from the code points (not the PCRE2 stand-ins), as llama.cpp does.
  std::vector<std::string> words;
  words.reserve(chunks.size());
  size_t ci = 0;
  for (const auto& [begin, end] : chunks) {
    while (cp_offset[ci] < begin) ++ci;
    std::string w;
    for (; ci < cps.size() && cp_offset[ci] < end; ++ci) {
      unicode::append_utf8(w, cps[ci] <= 0x10FFFF ? cps[ci] : 0xFFFD);
    }
    words.push_back(std::move(w));
  }
  return words;
}

}  // namespace specdec
