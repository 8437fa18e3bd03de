#include "engine/indent_limit.h"

namespace specdec {

size_t IndentLimit::push(std::string_view text) {
  if (stopped_) return 0;
  if (min_ <= 0) return text.size();
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_indent_) {
      if (c == ' ' || c == '\t') {
        ++indent_;
        continue;
      }
      if (indent_ < min_) {
        stopped_ = true;
        return i;
      }
      in_indent_ = false;
    }
    if (c == '\n') {
      in_indent_ = true;
      indent_ = 0;
    }
  }
  return text.size();
}

}  // namespace specdec
