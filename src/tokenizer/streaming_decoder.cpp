#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace specdec {

StreamingDecoder::StreamingDecoder(const Tokenizer& tok) : tok_(tok) {}

std::string StreamingDecoder::push(int32_t id) {
  pending_ += tok_.token_bytes(id);
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    size_t len = 0;
    const auto st = unicode::classify_utf8(std::string_view(pending_).substr(i), len);
    if (st == unicode::SeqStatus::Incomplete) break;  // wait for the rest of the character
    if (st == unicode::SeqStatus::Complete) {
      out.append(pending_, i, len);
    } else {
      out += unicode::kReplacementChar;
    }
    i += len;
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamingDecoder::finish() {
  // Whatever is left is a valid but truncated prefix: one replacement character stands for it.
  std::string out = pending_.empty() ? std::string() : std::string(unicode::kReplacementChar);
  pending_.clear();
  return out;
}

}  // namespace specdec
