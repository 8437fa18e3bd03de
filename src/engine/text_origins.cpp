#include "engine/text_origins.h"

#include <algorithm>

namespace specdec {

void TextOrigins::append(size_t n, TokenOrigin origin) {
  if (n == 0) return;
  if (!runs_.empty() && runs_.back().origin == origin) {
    runs_.back().n += n;
  } else {
    runs_.push_back({n, origin});
  }
  held_ += n;
}

void TextOrigins::release(std::string_view text, const Emit& emit) {
  size_t at = 0;
  while (at < text.size()) {
    if (runs_.empty()) {
      emit(text.substr(at), TokenOrigin::Target);
      return;
    }
    Run& run = runs_.front();
    const size_t n = std::min(run.n, text.size() - at);
    emit(text.substr(at, n), run.origin);
    at += n;
    run.n -= n;
    held_ -= n;
    if (run.n == 0) runs_.pop_front();
  }
}

}  // namespace specdec
