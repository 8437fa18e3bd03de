// A one-line progress bar on stderr for long operations. It draws only when stderr is a
// terminal, so logs and CI output stay clean.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace specdec::cli {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label);
  void update(int64_t done, int64_t total);
  void finish();  // clears the line

 private:
  std::string label_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool drawn_ = false;
};

}  // namespace specdec::cli
