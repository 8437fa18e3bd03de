// One exception type for every user-facing failure (bad file, bad flag, bad request).
// The CLI prints what() on one line and exits non-zero; the server maps it to a 4xx.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace specdec {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates anything streamable; GCC 12 has no std::format, so this stands in for it.
template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(str_cat(std::forward<Args>(args)...));
}

}  // namespace specdec
