#include "tokenizer/chat_template.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "gguf/gguf_file.h"

namespace specdec {

namespace {

bool contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

// Appends the parts in order. (Renderers avoid `"literal" + std::string` chains, on which GCC 12
// emits false -Wrestrict warnings.)
void add(std::string& out, std::initializer_list<std::string_view> parts) {
  for (auto p : parts) out.append(p);
}

// Jinja's `| trim` / Python's str.strip(): removes leading and trailing whitespace.
std::string trim(std::string_view s) {
  constexpr std::string_view kWs = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(kWs);
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(kWs);
  return std::string(s.substr(b, e - b + 1));
}

// Finds a literal default system prompt in a ChatML template, as in SmolLM2's
//   {% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are ...
// or in the else branch of Qwen2.5's
//   {%- if messages[0]['role'] == 'system' %}...{%- else %}{{- '<|im_start|>system\nYou are ...
// The newline may be a real one or a Jinja "\n" escape; the prompt must be plain text up to
// <|im_end|> (no expressions or string concatenation in between).
std::string extract_default_system(std::string_view tpl) {
  if (!contains(tpl, "!= 'system'") && !contains(tpl, "!= \"system\"") &&
      !contains(tpl, "== 'system'") && !contains(tpl, "== \"system\"")) {
    return {};
  }
  constexpr std::string_view kStart = "<|im_start|>system";
  for (size_t pos = tpl.find(kStart); pos != std::string_view::npos;
       pos = tpl.find(kStart, pos + 1)) {
    std::string_view rest = tpl.substr(pos + kStart.size());
    if (rest.starts_with("\\n")) {
      rest.remove_prefix(2);
    } else if (rest.starts_with("\n")) {
      rest.remove_prefix(1);
    } else {
      continue;
    }
    const size_t end = rest.find("<|im_end|>");
    if (end == std::string_view::npos) continue;
    const std::string_view body = rest.substr(0, end);
    if (body.empty() || contains(body, "'") || contains(body, "\"") || contains(body, "{{") ||
        contains(body, "{%")) {
      continue;
    }
    std::string out;
    for (size_t i = 0; i < body.size(); ++i) {
      if (body[i] == '\\' && i + 1 < body.size()) {
        const char e = body[++i];
        out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else {
        out += body[i];
      }
    }
    return out;
  }
  return {};
}

// Python's json.dumps(x, ensure_ascii=False), which is what HF transformers' `tojson` filter
// writes (default separators ", " and ": ", keys in their given order). Qwen2.5's template puts
// tool definitions and call arguments into the prompt that way, as the model was trained on.
void python_json_string(std::string_view s, std::string& out) {
  out += '"';
  for (const char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          char buf[8];  // lowercase hex, as Python writes it
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(ch));
          out += buf;
        } else {
          out += ch;  // ensure_ascii=False: UTF-8 passes through
        }
    }
  }
  out += '"';
}

// Deeper JSON is refused rather than recursed into (arguments are free text from the client, and
// parsing them is iterative but this writer is not). Python itself stops near 1000 levels.
constexpr int kMaxJsonDepth = 256;

void python_json(const nlohmann::ordered_json& j, std::string& out, int depth = 0) {
  if (depth > kMaxJsonDepth) {
    fail("JSON in a tool definition or tool call nests deeper than ", kMaxJsonDepth, " levels");
  }
  if (j.is_object()) {
    out += '{';
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it != j.begin()) out += ", ";
      python_json_string(it.key(), out);
      out += ": ";
      python_json(it.value(), out, depth + 1);
    }
    out += '}';
  } else if (j.is_array()) {
    out += '[';
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it != j.begin()) out += ", ";
      python_json(*it, out, depth + 1);
    }
    out += ']';
  } else if (j.is_string()) {
    python_json_string(j.get_ref<const std::string&>(), out);
  } else {
    out += j.dump();  // numbers, booleans, null: the same spelling (floats: nlohmann's shortest)
  }
}

// Qwen2.5's (Hermes-style) system block around the tool definitions, verbatim from its template.
// The {{...}} in the instructions is literal text: Jinja does not re-parse string literals.
constexpr std::string_view kToolsIntro =
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
    "provided with function signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view kToolsOutro =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, "
    "\"arguments\": <args-json-object>}}\n</tool_call><|im_end|>\n";

// An assistant message's tool calls, as Qwen2.5's template writes them. vLLM turns the arguments
// string into an object before rendering, so they are written re-serialized; text that is not
// JSON is written as a JSON string (what tojson makes of a string).
void render_tool_calls(const ChatMessage& m, std::string& out) {
  add(out, {"<|im_start|>", m.role});
  if (!m.content.empty()) add(out, {"\n", m.content});
  for (const ChatToolCall& c : m.tool_calls) {
    add(out, {"\n<tool_call>\n{\"name\": \"", c.name, "\", \"arguments\": "});
    const auto args =
        nlohmann::ordered_json::parse(c.arguments, nullptr, /*allow_exceptions=*/false);
    if (args.is_discarded()) {
      python_json_string(c.arguments, out);
    } else {
      python_json(args, out);
    }
    out += "}\n</tool_call>";
  }
  out += "<|im_end|>\n";
}

// ChatML. With `hermes` (Qwen2.5's template), tools go into the system block, which then takes the
// conversation's own system message in place of the default one, assistant tool calls are written
// in <tool_call> tags, and consecutive role "tool" results share one user turn in
// <tool_response> tags. Without tools the Qwen2.5 template renders ordinary turns exactly as plain
// ChatML does; other roles keep the generic turn (the template would drop them).
// With `thinking` (Qwen3's template), an assistant turn before the last user message keeps only
// what follows its "</think>", and enable_thinking false writes an empty think block after the
// generation prompt.
std::string render_chatml(std::span<const ChatMessage> msgs, bool gen, const std::string& dflt,
                          bool hermes, std::span<const std::string> tools, bool thinking,
                          bool enable_thinking) {
  std::string out;
  size_t first = 0;
  if (!tools.empty()) {
    const bool system = !msgs.empty() && msgs[0].role == "system";
    add(out,
        {"<|im_start|>system\n", system ? std::string_view(msgs[0].content) : dflt, kToolsIntro});
    for (size_t i = 0; i < tools.size(); ++i) {
      nlohmann::ordered_json tool;
      try {
        tool = nlohmann::ordered_json::parse(tools[i]);
      } catch (const nlohmann::json::exception& e) {
        fail("tool definition ", i, " is not valid JSON: ", e.what());
      }
      out += '\n';
      python_json(tool, out);
    }
    out += kToolsOutro;
    if (system) first = 1;
  } else if (!dflt.empty() && !msgs.empty() && msgs[0].role != "system") {
    add(out, {"<|im_start|>system\n", dflt, "<|im_end|>\n"});
  }
  size_t last_user = 0;
  for (size_t i = 0; i < msgs.size(); ++i) {
    if (msgs[i].role == "user") last_user = i;
  }
  ChatMessage answer;  // an earlier assistant turn without its reasoning
  for (size_t i = first; i < msgs.size(); ++i) {
    const ChatMessage* shown = &msgs[i];
    if (thinking && shown->role == "assistant" && i < last_user &&
        shown->content.find(kThinkClose) != std::string::npos) {
      answer = *shown;
      answer.content.erase(0, answer.content.rfind(kThinkClose) + kThinkClose.size());
      answer.content.erase(0,
                           std::min(answer.content.find_first_not_of('\n'), answer.content.size()));
      shown = &answer;
    }
    const ChatMessage& m = *shown;
    if (hermes && m.role == "assistant" && !m.tool_calls.empty()) {
      render_tool_calls(m, out);
    } else if (hermes && m.role == "tool") {
      if (i == 0 || msgs[i - 1].role != "tool") out += "<|im_start|>user";
      add(out, {"\n<tool_response>\n", m.content, "\n</tool_response>"});
      if (i + 1 == msgs.size() || msgs[i + 1].role != "tool") out += "<|im_end|>\n";
    } else {
      add(out, {"<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n"});
    }
  }
  if (gen) out += "<|im_start|>assistant\n";
  if (gen && thinking && !enable_thinking) out += "<think>\n\n</think>\n\n";
  return out;
}

// Meta Llama 3 / 3.0-style: contents are trimmed; the prompt starts with <|begin_of_text|>.
std::string render_llama3(std::span<const ChatMessage> msgs, bool gen, const std::string& bos) {
  std::string out = bos;
  for (const auto& m : msgs) {
    add(out,
        {"<|start_header_id|>", m.role, "<|end_header_id|>\n\n", trim(m.content), "<|eot_id|>"});
  }
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Llama 2 chat: the system prompt is wrapped in <<SYS>> inside the first user turn; every user
// turn opens with BOS, every assistant turn ends with EOS. There is no generation prompt.
std::string render_llama2(std::span<const ChatMessage> msgs, const std::string& bos,
                          const std::string& eos) {
  std::string system;
  size_t first = 0;
  if (!msgs.empty() && msgs[0].role == "system") {
    system = msgs[0].content;
    first = 1;
  }
  std::string out;
  for (size_t i = first; i < msgs.size(); ++i) {
    std::string content;
    if (i == first && first == 1) {
      add(content, {"<<SYS>>\n", system, "\n<</SYS>>\n\n"});
    }
    content += msgs[i].content;
    if (msgs[i].role == "user") {
      add(out, {bos, "[INST] ", trim(content), " [/INST]"});
    } else if (msgs[i].role == "assistant") {
      add(out, {" ", trim(content), " ", eos});
    }
  }
  return out;
}

// Gemma (2/3): assistant is called "model"; a leading system message is prepended to the first
// user turn followed by a blank line; contents are trimmed.
std::string render_gemma(std::span<const ChatMessage> msgs, bool gen, const std::string& bos) {
  std::string out = bos;
  std::string prefix;
  size_t first = 0;
  if (!msgs.empty() && msgs[0].role == "system") {
    add(prefix, {msgs[0].content, "\n\n"});
    first = 1;
  }
  for (size_t i = first; i < msgs.size(); ++i) {
    const std::string role = msgs[i].role == "assistant" ? "model" : msgs[i].role;
    add(out, {"<start_of_turn>", role, "\n", i == first ? std::string_view(prefix) : "",
              trim(msgs[i].content), "<end_of_turn>\n"});
  }
  if (gen) out += "<start_of_turn>model\n";
  return out;
}

// Zephyr: <|role|>\ncontent</s>\n (EOS text closes each turn).
std::string render_zephyr(std::span<const ChatMessage> msgs, bool gen, const std::string& eos) {
  std::string out;
  for (const auto& m : msgs) add(out, {"<|", m.role, "|>\n", m.content, eos, "\n"});
  if (gen) out += "<|assistant|>\n";
  return out;
}

// Phi-3: <|role|>\ncontent<|end|>\n.
std::string render_phi3(std::span<const ChatMessage> msgs, bool gen) {
  std::string out;
  for (const auto& m : msgs) add(out, {"<|", m.role, "|>\n", m.content, "<|end|>\n"});
  if (gen) out += "<|assistant|>\n";
  return out;
}

}  // namespace

ChatTemplate ChatTemplate::of(ChatFormat format) {
  ChatTemplate t;
  t.format_ = format;
  t.set_special_texts(format == ChatFormat::Gemma    ? "<bos>"
                      : format == ChatFormat::Llama3 ? "<|begin_of_text|>"
                                                     : "<s>",
                      "</s>");
  return t;
}

ChatTemplate ChatTemplate::detect(std::string_view tpl) {
  ChatFormat f = ChatFormat::Unknown;
  if (contains(tpl, "<|im_start|>")) {
    f = ChatFormat::ChatML;
  } else if (contains(tpl, "<|start_header_id|>")) {
    f = ChatFormat::Llama3;
  } else if (contains(tpl, "<start_of_turn>")) {
    f = ChatFormat::Gemma;
  } else if (contains(tpl, "<|end|>") && contains(tpl, "<|assistant|>")) {
    f = ChatFormat::Phi3;
  } else if (contains(tpl, "<|user|>")) {
    f = ChatFormat::Zephyr;
  } else if (contains(tpl, "[INST]")) {
    f = ChatFormat::Llama2;
  }
  ChatTemplate t = of(f);
  if (f == ChatFormat::ChatML) {
    t.default_system_ = extract_default_system(tpl);
    t.tools_ = contains(tpl, "<tool_call>");
    t.thinking_ = contains(tpl, kThinkOpen);
  }
  return t;
}

namespace {

void set_vocab_special_texts(const gguf::GgufFile& file, ChatTemplate& t,
                             const std::string& bos_fallback, const std::string& eos_fallback) {
  // Use the vocab's own BOS/EOS spellings where the template writes them out.
  const auto* tokens = file.find_array("tokenizer.ggml.tokens");
  auto text_of = [&](const char* key, const std::string& fallback) {
    const int64_t id = file.get_int_or(key, -1);
    if (tokens == nullptr || id < 0 || static_cast<size_t>(id) >= tokens->strings.size()) {
      return fallback;
    }
    return tokens->strings[static_cast<size_t>(id)];
  };
  t.set_special_texts(text_of("tokenizer.ggml.bos_token_id", bos_fallback),
                      text_of("tokenizer.ggml.eos_token_id", eos_fallback));
}

}  // namespace

ChatTemplate ChatTemplate::named(std::string_view name_or_jinja) {
  for (ChatFormat f : {ChatFormat::ChatML, ChatFormat::Llama3, ChatFormat::Llama2,
                       ChatFormat::Gemma, ChatFormat::Zephyr, ChatFormat::Phi3}) {
    ChatTemplate t = of(f);
    if (t.name() == name_or_jinja) return t;
  }
  ChatTemplate t = detect(name_or_jinja);
  if (t.format_ == ChatFormat::Unknown) {
    const std::string shown(name_or_jinja.substr(0, 60));
    fail("chat template '", shown, name_or_jinja.size() > 60 ? "...'" : "'",
         " is neither a name specdec renders (chatml, llama3, llama2, gemma, zephyr, phi3) nor a "
         "Jinja template of one of those families");
  }
  return t;
}

ChatTemplate ChatTemplate::from_gguf(const gguf::GgufFile& file, std::string_view name_or_jinja) {
  ChatTemplate t = named(name_or_jinja);
  set_vocab_special_texts(file, t, t.bos_text_, t.eos_text_);
  return t;
}

ChatTemplate ChatTemplate::from_gguf(const gguf::GgufFile& file) {
  const std::string tpl = file.get_string_or("tokenizer.chat_template", "");
  ChatTemplate t = tpl.empty() ? of(ChatFormat::ChatML) : detect(tpl);
  set_vocab_special_texts(file, t, t.bos_text_, t.eos_text_);
  return t;
}

void ChatTemplate::set_special_texts(std::string bos, std::string eos) {
  bos_text_ = std::move(bos);
  eos_text_ = std::move(eos);
}

bool ChatTemplate::starts_with_bos() const {
  return format_ == ChatFormat::Llama3 || format_ == ChatFormat::Llama2 ||
         format_ == ChatFormat::Gemma;
}

std::string ChatTemplate::apply(std::span<const ChatMessage> msgs, bool gen) const {
  return apply(msgs, gen, {});
}

std::string ChatTemplate::apply(std::span<const ChatMessage> msgs, bool gen,
                                std::span<const std::string> tools) const {
  return apply(msgs, gen, tools, /*enable_thinking=*/true);
}

std::string ChatTemplate::apply(std::span<const ChatMessage> msgs, bool gen,
                                std::span<const std::string> tools, bool enable_thinking) const {
  // Other templates' tool conventions are not known here, and dropping the tools or calls would
  // silently give the model a different conversation than the client sent. (Role "tool" results
  // stay rendered like any other role, as unrecognised roles always have been.)
  if (!tools_) {
    const bool calls = std::any_of(msgs.begin(), msgs.end(),
                                   [](const ChatMessage& m) { return !m.tool_calls.empty(); });
    if (!tools.empty() || calls) fail("this model's chat template has no tool-calling convention");
  }
  switch (format_) {
    case ChatFormat::Llama3:
      return render_llama3(msgs, gen, bos_text_);
    case ChatFormat::Llama2:
      return render_llama2(msgs, bos_text_, eos_text_);
    case ChatFormat::Gemma:
      return render_gemma(msgs, gen, bos_text_);
    case ChatFormat::Zephyr:
      return render_zephyr(msgs, gen, eos_text_);
    case ChatFormat::Phi3:
      return render_phi3(msgs, gen);
    case ChatFormat::ChatML:
    case ChatFormat::Unknown:
      break;
  }
  return render_chatml(msgs, gen, default_system_, tools_, tools, thinking_, enable_thinking);
}

std::string ChatTemplate::name() const {
  switch (format_) {
    case ChatFormat::ChatML:
      return "chatml";
    case ChatFormat::Llama3:
      return "llama3";
    case ChatFormat::Llama2:
      return "llama2";
    case ChatFormat::Gemma:
      return "gemma";
    case ChatFormat::Zephyr:
      return "zephyr";
    case ChatFormat::Phi3:
      return "phi3";
    case ChatFormat::Unknown:
      break;
  }
  return "unknown (rendered as chatml)";
}

std::vector<int32_t> encode_prompt(const Tokenizer& tok, std::string_view rendered) {
  bool add = tok.add_bos();
  if (add && tok.bos() >= 0 && rendered.starts_with(tok.token_text(tok.bos()))) add = false;
  std::vector<int32_t> ids;
  if (add) ids.push_back(tok.bos());
  auto rest = tok.encode(rendered, /*add_special=*/false, /*parse_special=*/true);
  ids.insert(ids.end(), rest.begin(), rest.end());
  if (tok.add_eos() && tok.eos() >= 0) ids.push_back(tok.eos());
  return ids;
}

std::vector<int32_t> encode_fim_prompt(const Tokenizer& tok, std::string_view prefix,
                                       std::string_view suffix) {
  const std::optional<Tokenizer::FimTokens> fim = tok.fim();
  if (!fim) fail("this model has no fill-in-the-middle tokens (a code model's <|fim_prefix|>...)");
  std::vector<int32_t> out;
  if (tok.add_bos() && tok.bos() >= 0) out.push_back(tok.bos());
  out.push_back(fim->prefix);
  for (int32_t id : tok.encode(prefix, /*add_special=*/false, /*parse_special=*/false)) {
    out.push_back(id);
  }
  out.push_back(fim->suffix);
  for (int32_t id : tok.encode(suffix, /*add_special=*/false, /*parse_special=*/false)) {
    out.push_back(id);
  }
  out.push_back(fim->middle);
  return out;
}

}  // namespace specdec
