#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>

namespace specdec::cli {

ProgressBar::ProgressBar(std::string label)
    : label_(std::move(label)),
      enabled_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void ProgressBar::update(int64_t done, int64_t total) {
  if (!enabled_ || total <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  // Redrawing more than ~10 times a second costs terminal time and shows nothing new.
  if (drawn_ && done < total && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  drawn_ = true;
  constexpr int kWidth = 30;
  const double frac = static_cast<double>(done) / static_cast<double>(total);
  const int filled = static_cast<int>(frac * kWidth);
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double eta =
      done > 0 ? elapsed * (static_cast<double>(total - done) / static_cast<double>(done)) : 0;
  std::fprintf(stderr, "\r%s [%.*s%*s] %lld/%lld %3.0f%% eta %.0fs ", label_.c_str(), filled,
               "##############################", kWidth - filled, "", static_cast<long long>(done),
               static_cast<long long>(total), frac * 100.0, eta);
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (enabled_ && drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
}

}  // namespace specdec::cli
