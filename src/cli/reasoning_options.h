// llama.cpp's reasoning flags for the commands that run one conversation (`run`, `chat`):
// --reasoning-budget N and --reasoning-budget-message TEXT. `serve` takes the same flags as
// request defaults (request_default_options.cpp); the meanings are the same:
//   -1     thinking models think as long as they like (the default);
//   0      they do not: a chat prompt gets the empty "<think>\n\n</think>\n\n" block that Qwen3's
//          template writes for enable_thinking false, and a block a raw prompt leaves open (or
//          one the model opens) is closed at once;
//   N > 0  at most N tokens inside a <think> block, then the message and the closing tag are
//          forced and the answer follows (engine/reasoning_budget.h; exact under speculation).
// Templates without the <think> tags ignore both flags, as llama.cpp does; a note on stderr
// says so.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "cli/arg_parser.h"
#include "engine/engine.h"
#include "tokenizer/chat_template.h"

namespace specdec::cli {

struct ReasoningOptions {
  int32_t budget = -1;  // -1: unrestricted; 0: no thinking; N: tokens inside a block
  std::string message;  // said before the block is closed for the model
};

void add_reasoning_options(ArgParser& p, ReasoningOptions& options);
// A --reasoning-budget value (-1, 0 or a number of tokens); a one-line error otherwise. serve's
// flag reads it the same way.
int32_t parse_reasoning_budget(const std::string& value);

// Whether a chat prompt leaves the thinking to the model (false: the template writes the empty
// block, ChatTemplate::apply's enable_thinking).
inline bool thinking_enabled(const ReasoningOptions& options) { return options.budget != 0; }

// The budget of every generation of the command.
void apply_reasoning_options(const ReasoningOptions& options, GenerationOptions& go);

// One line on `log` when a flag was given but the template does not think (nothing changes).
void note_reasoning_options(const ReasoningOptions& options, const ChatTemplate& chat_template,
                            std::ostream& log);

}  // namespace specdec::cli
