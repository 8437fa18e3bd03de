// Stop strings over a text stream. Text that could still turn out to be the start of a stop
// string is held back, so a streamed response never shows part of a stop string and the final
// text ends right before the first complete match.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace specdec {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Adds generated text; returns the part that is now safe to emit. After a match, stopped()
  // is true and everything from the match on is dropped.
  std::string push(std::string_view text);
  // End of generation: releases whatever was held back (unless stopped).
  std::string finish();
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace specdec
