#include "cli/color_output.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace specdec::cli {

ColorMode parse_color_mode(std::string_view value) {
  if (value.empty() || value == "auto") return ColorMode::Auto;
  if (value == "always") return ColorMode::Always;
  if (value == "never") return ColorMode::Never;
  fail("--color must be never, auto or always, got '", value, "'");
}

bool color_enabled(ColorMode mode, bool stdout_is_terminal, const char* no_color_env,
                   const char* term_env) {
  switch (mode) {
    case ColorMode::Always:
      return true;
    case ColorMode::Never:
      return false;
    case ColorMode::Auto:
      break;
  }
  if (no_color_env != nullptr && *no_color_env != '\0') return false;
  if (term_env != nullptr && std::strcmp(term_env, "dumb") == 0) return false;
  return stdout_is_terminal;
}

bool color_enabled(ColorMode mode) {
  return color_enabled(mode, isatty(STDOUT_FILENO) == 1, std::getenv("NO_COLOR"),
                       std::getenv("TERM"));
}

std::string_view origin_escape(TokenOrigin origin) {
  switch (origin) {
    case TokenOrigin::Draft:
      return "\x1b[32m";  // green
    case TokenOrigin::Correction:
      return "\x1b[33m";  // yellow
    case TokenOrigin::Bonus:
      return "\x1b[36m";  // cyan
    case TokenOrigin::Target:
      return "";
  }
  return "";
}

std::string color_legend() {
  std::string out = "colors: ";
  const std::pair<TokenOrigin, const char*> entries[] = {
      {TokenOrigin::Draft, "accepted draft"},
      {TokenOrigin::Correction, "correction (target after a rejection)"},
      {TokenOrigin::Bonus, "bonus (all drafts accepted)"},
      {TokenOrigin::Target, "target step (default colour)"},
  };
  bool first = true;
  for (const auto& [origin, name] : entries) {
    if (!first) out += " | ";
    first = false;
    const std::string_view esc = origin_escape(origin);
    out += esc;
    out += name;
    if (!esc.empty()) out += kColorReset;
  }
  return out + "\n";
}

void ColorWriter::write(std::string_view text, TokenOrigin origin) {
  if (text.empty()) return;
  const std::string_view esc = origin_escape(origin);
  if (esc != active_) {
    out_ << (esc.empty() ? kColorReset : esc);
    active_ = esc;
  }
  out_ << text;
}

void ColorWriter::finish() {
  if (!active_.empty()) out_ << kColorReset;
  active_ = {};
}

}  // namespace specdec::cli
