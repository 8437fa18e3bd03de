// Chat prompt rendering for the common template families. Instead of running Jinja, the model's
// template is recognised by marker substrings and rendered by hand-written code that produces
// exactly what the Jinja template produces for ordinary conversations (string contents, roles
// system/user/assistant) and, for Qwen2.5's ChatML template, for OpenAI-style tool calling
// (tool definitions, assistant tool calls, role "tool" results).
//
// Double BOS: Llama 3, Llama 2 and Gemma templates begin with the BOS token's text. Tokenize
// such a prompt with parse_special=true and add_special=false (or use encode_prompt below,
// which adds BOS only when the rendered text does not already start with it).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace specdec {

namespace gguf {
class GgufFile;
}

// The tags a thinking model writes around its reasoning (ChatTemplate::thinking()): DeepSeek-R1's
// and Qwen3's, the only convention here. The server splits replies at them
// (server/reasoning.h), the reasoning budget counts between them (engine/reasoning_budget.h).
inline constexpr std::string_view kThinkOpen = "<think>";
inline constexpr std::string_view kThinkClose = "</think>";

// One function call an assistant message made (OpenAI's tool_calls[i].function).
struct ChatToolCall {
  std::string name;
  std::string arguments;  // JSON text, as OpenAI carries it
};

struct ChatMessage {
  std::string role, content;
  // Defaulted so that {"user", "hi"} stays free of -Wmissing-field-initializers.
  std::vector<ChatToolCall> tool_calls = {};  // assistant messages only
};

enum class ChatFormat { ChatML, Llama3, Llama2, Gemma, Zephyr, Phi3, Unknown };

class ChatTemplate {
 public:
  // Recognises the family from marker substrings. Unrecognised templates give Unknown, which
  // renders as ChatML (the most common convention, and llama.cpp's fallback too).
  static ChatTemplate detect(std::string_view jinja_template);
  // tokenizer.chat_template; absent -> ChatML. BOS/EOS texts come from the file's vocab.
  static ChatTemplate from_gguf(const gguf::GgufFile& file);
  // llama.cpp's --chat-template: one of the names name() gives (chatml, llama3, llama2, gemma,
  // zephyr, phi3), or a Jinja template of one of those families. Throws specdec::Error for a
  // template this code does not render (detect() would render it as ChatML, silently).
  static ChatTemplate named(std::string_view name_or_jinja);
  // named(), in place of the file's template, with the vocabulary's BOS/EOS texts as from_gguf.
  static ChatTemplate from_gguf(const gguf::GgufFile& file, std::string_view name_or_jinja);
  static ChatTemplate of(ChatFormat format);

  // Renders with no tools. Assistant tool calls need a template that supports_tools() (others
  // throw specdec::Error); role "tool" messages render as any other role does there.
  std::string apply(std::span<const ChatMessage> msgs, bool add_generation_prompt) const;
  // tools: each one tool definition as a JSON text (OpenAI's {"type": "function", "function":
  // {...}}), written into the prompt as Python's json.dumps would (HF transformers' tojson).
  // Non-empty tools with a template that does not support them: throws specdec::Error.
  std::string apply(std::span<const ChatMessage> msgs, bool add_generation_prompt,
                    std::span<const std::string> tools) const;
  // enable_thinking false (vLLM's chat_template_kwargs, Ollama's think): with a thinking
  // template, the generation prompt gets the empty "<think>\n\n</think>\n\n" block that Qwen3's
  // template writes, so that the model answers without reasoning. Ignored by other templates.
  std::string apply(std::span<const ChatMessage> msgs, bool add_generation_prompt,
                    std::span<const std::string> tools, bool enable_thinking) const;
  ChatFormat format() const { return format_; }
  // Whether apply() can render tools: the template is ChatML with Qwen2.5's Hermes-style
  // convention (<tools>, <tool_call>, <tool_response>), recognised by the "<tool_call>" marker.
  bool supports_tools() const { return tools_; }
  // Whether the model reasons in "<think>...</think>" before answering: a ChatML template that
  // writes the tags (Qwen3's). Its assistant turns before the last user message are rendered
  // without their reasoning, as the template does.
  bool thinking() const { return thinking_; }
  std::string name() const;

  // Whether apply() output begins with the BOS text (so the tokenizer must not add another).
  bool starts_with_bos() const;
  // ChatML's default system prompt, inserted when the conversation does not start with one
  // (empty: none). Taken from the template text, e.g. SmolLM2's.
  const std::string& default_system() const { return default_system_; }

  // Texts of the BOS/EOS tokens used by templates that spell them out (defaults: <s>, </s>,
  // Gemma: <bos>).
  void set_special_texts(std::string bos, std::string eos);

 private:
  ChatFormat format_ = ChatFormat::ChatML;
  bool tools_ = false;
  bool thinking_ = false;
  std::string default_system_;
  std::string bos_text_, eos_text_;
};

// Tokenizes a rendered chat prompt: special tokens are parsed, and BOS is added only when the
// vocab wants one and the text does not already begin with the BOS token's text.
std::vector<int32_t> encode_prompt(const Tokenizer& tok, std::string_view rendered);

// A fill-in-the-middle prompt in the prefix-suffix-middle order code models are trained on (and
// llama-server's /infill builds): [BOS] PRE prefix SUF suffix MID; the model then writes the
// middle. The code is text: special-token spellings in it are not parsed. Throws specdec::Error
// when the vocabulary has no FIM markers (Tokenizer::fim).
std::vector<int32_t> encode_fim_prompt(const Tokenizer& tok, std::string_view prefix,
                                       std::string_view suffix);

}  // namespace specdec
