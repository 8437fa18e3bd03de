// `specdec run --color`: the streamed text coloured by where each token came from (an accepted
// draft, the target's correction after a rejection, the bonus token after a fully accepted
// round, or a plain target step), with ANSI escapes, plus a one-line legend.
//
// Which origin a piece of text has is decided in the engine (engine/text_origins.h: the bytes
// the UTF-8 decoder releases for a token take that token's origin, so a character split across
// tokens takes the origin of the token that completes it). Here we only paint: an escape is
// written when the origin changes, never between pieces of the same origin, and the colour is
// reset at the end, so removing every escape leaves exactly the plain text.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "speculative/token_origin.h"

namespace specdec::cli {

enum class ColorMode { Never, Auto, Always };

// "never", "auto", "always"; "" (a bare --color) means auto. Throws specdec::Error otherwise.
ColorMode parse_color_mode(std::string_view value);

// Whether to colour: Always yes, Never no; Auto when stdout is a terminal, NO_COLOR is unset or
// empty (no-color.org) and TERM is not "dumb".
bool color_enabled(ColorMode mode, bool stdout_is_terminal, const char* no_color_env,
                   const char* term_env);
// The same for this process's stdout and environment.
bool color_enabled(ColorMode mode);

// The SGR escape an origin is painted with ("" for target steps: they stay in the default
// colour, so colour marks exactly the text that speculation produced).
std::string_view origin_escape(TokenOrigin origin);
inline constexpr std::string_view kColorReset = "\x1b[0m";

// "colors: accepted draft | correction (target after a rejection) | bonus (all accepted) |
// target step", each name in its colour, ending in a newline.
std::string color_legend();

class ColorWriter {
 public:
  explicit ColorWriter(std::ostream& out) : out_(out) {}
  ~ColorWriter() { finish(); }  // an error mid-stream must not leave the terminal coloured
  ColorWriter(const ColorWriter&) = delete;
  ColorWriter& operator=(const ColorWriter&) = delete;
  void write(std::string_view text, TokenOrigin origin);
  // Resets the colour if one is active (call before anything else goes to the stream).
  void finish();

 private:
  std::ostream& out_;
  std::string_view active_;  // the escape in effect; empty: default colour
};

}  // namespace specdec::cli
