// Which token origin (speculative/token_origin.h) each byte of streamed text has, across the
// stop matcher's hold-back: text enters with the origin of the token that released it and
// leaves, possibly much later and in other chunk sizes, as runs of one origin each.
//
// The rule, end to end: the streaming UTF-8 decoder releases complete characters only, so the
// text released when token t is pushed (t's own bytes, after at most one character whose first
// bytes came from earlier tokens) takes t's origin. A character split across tokens is thus
// coloured by the token that completes it; every other byte by the token it belongs to.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <string_view>

#include "speculative/token_origin.h"

namespace specdec {

class TextOrigins {
 public:
  using Emit = std::function<void(std::string_view text, TokenOrigin origin)>;

  // n bytes of text enter the hold-back, all of this origin (n = 0 does nothing).
  void append(size_t n, TokenOrigin origin);
  // text is the next text.size() bytes released (the stop matcher releases a prefix of what it
  // holds); calls emit once per maximal run of one origin, in order. Bytes beyond what was
  // appended (a caller bug) are emitted as TokenOrigin::Target.
  void release(std::string_view text, const Emit& emit);
  size_t held() const { return held_; }  // bytes appended but not yet released

 private:
  struct Run {
    size_t n;
    TokenOrigin origin;
  };
  std::deque<Run> runs_;
  size_t held_ = 0;
};

}  // namespace specdec
