// llama-server's n_indent for code completion: a completion that leaves the block it was asked
// to fill ends there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace specdec {

// From the second line of a text on, a line whose first character other than a space or tab
// comes after fewer than `min_indent` of them ends the text right before that character (its
// indentation stays; a blank line ends it at its newline), as llama-server cuts it.
class IndentLimit {
 public:
  explicit IndentLimit(int32_t min_indent) : min_(min_indent) {}

  // Feeds the next piece of text; returns how much of it to keep: all of it, or (once a line
  // fails) the part before the cut, after which stopped() is true and nothing more is kept.
  size_t push(std::string_view text);
  bool stopped() const { return stopped_; }

 private:
  int32_t min_;
  bool in_indent_ = false;  // after a newline, before the line's first other character
  int32_t indent_ = 0;
  bool stopped_ = false;
};

}  // namespace specdec
