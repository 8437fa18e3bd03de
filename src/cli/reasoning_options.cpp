#include "cli/reasoning_options.h"

#include <cstdint>
#include <limits>
#include <ostream>

#include "common/error.h"

namespace specdec::cli {

void add_reasoning_options(ArgParser& p, ReasoningOptions& options) {
  p.add_value({"--reasoning-budget"}, "N",
              "thinking models (a chat template with <think> tags): -1 thinks as long as it "
              "likes (the default); 0 does not think (a --chat prompt gets the empty <think> "
              "block, and an open block is closed at once); N > 0: at most N tokens inside a "
              "<think> block, after which --reasoning-budget-message and the closing tag are "
              "forced and the answer follows, as llama-server's",
              [&options](const std::string& v) { options.budget = parse_reasoning_budget(v); });
  p.add_string({"--reasoning-budget-message"}, "TEXT",
               "what the reasoning says before its block is closed for it when the budget is "
               "spent (default: nothing)",
               options.message);
}

int32_t parse_reasoning_budget(const std::string& value) {
  const int64_t n = parse_int(value, "--reasoning-budget");
  if (n < -1 || n > std::numeric_limits<int32_t>::max()) {
    fail(
        "--reasoning-budget must be -1 (unrestricted), 0 (no thinking) or a number of tokens, got ",
        value);
  }
  return static_cast<int32_t>(n);
}

void apply_reasoning_options(const ReasoningOptions& options, GenerationOptions& go) {
  go.reasoning_budget = options.budget;
  go.reasoning_budget_message = options.message;
}

void note_reasoning_options(const ReasoningOptions& options, const ChatTemplate& chat_template,
                            std::ostream& log) {
  if (options.budget == -1 || chat_template.thinking()) return;
  log << "note: the model's chat template (" << chat_template.name()
      << ") does not think in <think> tags; --reasoning-budget changes nothing\n";
}

}  // namespace specdec::cli
