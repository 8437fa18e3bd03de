// A thinking model's reasoning, told apart from its answer. Models such as Qwen3 write
// "<think>\n...\n</think>\n\n" before the answer when their chat template allows thinking;
// vLLM's and llama-server's reasoning parsers return the part between the tags as
// `reasoning_content`, Ollama as `thinking`. Only for models whose template has the tags
// (ChatTemplate::thinking()): anywhere else "<think>" is ordinary text.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tokenizer/chat_template.h"  // kThinkOpen, kThinkClose
#include "tokenizer/tokenizer.h"

namespace specdec::server {

struct ReasoningSplit {
  std::string reasoning;  // between the tags, without the newlines that pad it
  std::string content;    // after "</think>", without the newlines that follow it
};

// A whole reply: a leading "<think>...</think>" block is the reasoning (one never closed is all
// reasoning: the reply ended inside it); a reply that does not open with the tag is all content.
// `opened`: the prompt itself ended with "<think>", so the reply starts inside the block.
ReasoningSplit split_reasoning(std::string_view reply, bool opened = false);

// llama-server's reasoning_format (its --reasoning-format flag and the request field): `auto`
// and `deepseek` split a thinking template's reply as above (the tags are DeepSeek-R1's and
// Qwen3's, the only convention here, so the two are one); `none` leaves the reply whole in the
// content, tags and all, as a model without the tags gives it; `deepseek-legacy` does both for
// OpenAI's chat completions: the reasoning apart, and the reply whole in the content (the other
// APIs, which have a field of their own for the reasoning, split it as `deepseek` does).
enum class ReasoningFormat { Auto, Deepseek, DeepseekLegacy, None };
// The format a name gives; nullopt for any other name.
std::optional<ReasoningFormat> reasoning_format_named(std::string_view name);
inline constexpr std::string_view kReasoningFormatNames = "auto, deepseek, deepseek-legacy or none";

// How a request's replies split (each API's response metadata holds one): `split` when the
// model's template thinks (ChatTemplate::thinking()), `opened` when the prompt's prefill left a
// <think> block open, so that the reply starts inside it.
struct ReasoningMode {
  bool split = false;
  bool opened = false;
  // deepseek-legacy on OpenAI's chat completions: the content is the whole reply, tags and all,
  // and the reasoning goes out besides (only with `split`).
  bool whole_content = false;
  // The reply's reasoning and content: split_reasoning (with whole_content, the reply itself as
  // the content), or all content when not split.
  ReasoningSplit of(std::string_view reply) const;
};

// How many of a reply's tokens are its reasoning (OpenAI's usage.output_tokens_details
// .reasoning_tokens): those up to the one that completes "</think>", or all of them when the
// block never closes; 0 when `reasoning` (split_reasoning found some) is false.
int64_t count_reasoning_tokens(const Tokenizer& tokenizer, std::span<const int32_t> tokens,
                               bool reasoning);

// The same split for a reply that arrives in pieces: push() returns what can go out now (text
// that might still be the start of a tag is held), finish() the rest. The pieces add up to
// split_reasoning of the whole reply.
class ReasoningStream {
 public:
  explicit ReasoningStream(bool opened = false);
  ReasoningSplit push(std::string_view text);
  ReasoningSplit finish();

 private:
  enum class State { Start, Reasoning, AfterClose, Content };
  ReasoningSplit drain(bool end);

  State state_;
  std::string held_;                // received, not yet given out
  bool reasoning_started_ = false;  // some reasoning went out (its leading newlines are gone)
};

}  // namespace specdec::server
