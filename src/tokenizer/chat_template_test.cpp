#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/error.h"
#include "tokenizer/test_vocabs.h"

namespace specdec {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "You are terse."},
    {"user", "Hi!"},
    {"assistant", "Hello."},
    {"user", "Tell me a joke."},
};
const std::vector<ChatMessage> kNoSystem = {{"user", "Hi!"}};

// SmolLM2-135M-Instruct's tokenizer.chat_template, verbatim.
constexpr std::string_view kSmolLM2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\n' }}{% endif %}";

TEST(ChatTemplate, DetectsFamiliesByMarkers) {
  EXPECT_EQ(ChatTemplate::detect(kSmolLM2Template).format(), ChatFormat::ChatML);
  EXPECT_EQ(ChatTemplate::detect("{{ '<|start_header_id|>' }}").format(), ChatFormat::Llama3);
  EXPECT_EQ(ChatTemplate::detect("{{ '<start_of_turn>' }}").format(), ChatFormat::Gemma);
  EXPECT_EQ(ChatTemplate::detect("{{ '[INST] ' }}").format(), ChatFormat::Llama2);
  EXPECT_EQ(ChatTemplate::detect("{{ '<|user|>\n' }}").format(), ChatFormat::Zephyr);
  EXPECT_EQ(ChatTemplate::detect("{{ '<|assistant|>' + '<|end|>' }}").format(), ChatFormat::Phi3);
  const ChatTemplate unknown = ChatTemplate::detect("{{ whatever }}");
  EXPECT_EQ(unknown.format(), ChatFormat::Unknown);
  EXPECT_EQ(unknown.apply(kNoSystem, true),
            "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, NamedByLlamaCppsNamesOrByAJinjaTemplateOfAFamily) {
  EXPECT_EQ(ChatTemplate::named("llama2").format(), ChatFormat::Llama2);
  EXPECT_EQ(ChatTemplate::named("phi3").format(), ChatFormat::Phi3);
  EXPECT_EQ(ChatTemplate::named("chatml").apply(kNoSystem, true),
            "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
  const ChatTemplate smol = ChatTemplate::named(kSmolLM2Template);
  EXPECT_EQ(smol.format(), ChatFormat::ChatML);
  EXPECT_FALSE(smol.default_system().empty());
  // What would render as ChatML only by default is refused, not served as ChatML.
  for (std::string_view bad : {"{{ whatever }}", "vicuna", ""}) {
    try {
      (void)ChatTemplate::named(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("neither a name specdec renders"), std::string::npos);
    }
  }
}

TEST(ChatTemplate, ChatMLWithSmolLM2DefaultSystem) {
  const ChatTemplate t = ChatTemplate::detect(kSmolLM2Template);
  EXPECT_EQ(t.default_system(),
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  EXPECT_EQ(t.apply(kNoSystem, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(
      t.apply(kConversation, false),
      "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
      "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nTell me a joke.<|im_end|>\n");
  EXPECT_FALSE(t.starts_with_bos());
}

TEST(ChatTemplate, ChatMLDefaultSystemWithJinjaEscapes) {
  // Qwen2.5 style: the newline inside the Jinja string literal is an escape sequence.
  const ChatTemplate t = ChatTemplate::detect(
      "{%- if messages[0]['role'] != 'system' %}{{- '<|im_start|>system\\nYou are "
      "Qwen.<|im_end|>\\n' }}"
      "{%- endif %}{{ '<|im_start|>' + message.role + '\\n' + message.content }}");
  EXPECT_EQ(t.default_system(), "You are Qwen.");
  const ChatTemplate plain = ChatTemplate::detect("{{ '<|im_start|>' + role }}");
  EXPECT_EQ(plain.default_system(), "");
  EXPECT_EQ(plain.apply(kNoSystem, false), "<|im_start|>user\nHi!<|im_end|>\n");
}

TEST(ChatTemplate, ChatMLDefaultSystemInAnElseBranch) {
  // Qwen2.5-Coder's template: the user's system message if there is one, else a literal. The
  // branch that uses the user's message concatenates an expression, so only the literal counts.
  const ChatTemplate t = ChatTemplate::detect(
      "{%- if messages[0]['role'] == 'system' %}"
      "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
      "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a "
      "helpful assistant.<|im_end|>\\n' }}{%- endif %}"
      "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}");
  EXPECT_EQ(t.default_system(),
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  EXPECT_EQ(t.apply(kNoSystem, true),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
}

// Qwen2.5-Coder-1.5B-Instruct's tokenizer.chat_template, verbatim (Hermes-style tool calling).
constexpr std::string_view kQwen25Template = R"tpl({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)tpl";

// The fixed text of Qwen2.5's tools system block around the definitions. The expected strings in
// the tool tests below were checked against the template above rendered by jinja2 the way HF
// transformers does (trim_blocks, lstrip_blocks, tojson = json.dumps(ensure_ascii=False)).
const std::string kToolsIntro =
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
const std::string kToolsOutro =
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    "{{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n</tool_call><|im_end|>\n";
const std::string kQwenSystem =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

constexpr std::string_view kWeatherTool =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Current )"
    R"(weather in a city.", "parameters": {"type": "object", "properties": {"city": )"
    R"({"type": "string"}}, "required": ["city"]}}})";
// Compact JSON in, Python's spacing out.
constexpr std::string_view kTimeTool =
    R"({"type":"function","function":{"name":"get_time","parameters":{"type":"object",)"
    R"("properties":{}}}})";
const std::string kWeatherToolOut =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Current )"
    R"(weather in a city.", "parameters": {"type": "object", "properties": {"city": )"
    R"({"type": "string"}}, "required": ["city"]}}})";
const std::string kTimeToolOut =
    R"({"type": "function", "function": {"name": "get_time", "parameters": {"type": )"
    R"("object", "properties": {}}}})";

TEST(ChatTemplate, DetectsQwenToolCalling) {
  const ChatTemplate t = ChatTemplate::detect(kQwen25Template);
  EXPECT_EQ(t.format(), ChatFormat::ChatML);
  EXPECT_TRUE(t.supports_tools());
  EXPECT_EQ(t.default_system(), kQwenSystem);
  EXPECT_FALSE(ChatTemplate::detect(kSmolLM2Template).supports_tools());
  EXPECT_FALSE(ChatTemplate::of(ChatFormat::ChatML).supports_tools());
  // The marker alone does not make another family a Hermes one.
  EXPECT_FALSE(
      ChatTemplate::detect("{{ '<|start_header_id|>' + '<tool_call>' }}").supports_tools());
}

// Without tools the Qwen2.5 template renders ordinary conversations as plain ChatML does.
TEST(ChatTemplate, QwenWithoutToolsIsPlainChatML) {
  const ChatTemplate t = ChatTemplate::detect(kQwen25Template);
  const std::vector<std::string> none;
  EXPECT_EQ(t.apply(kConversation, true, none),
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nTell me a joke.<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(t.apply(kNoSystem, true),
            "<|im_start|>system\n" + kQwenSystem +
                "<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
}

// Qwen3's template (abridged to what detection reads: ChatML, the Hermes tool tags, the think
// tags and its enable_thinking switch).
constexpr const char* kQwen3Template =
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\n' + content }}"
    "{%- if '</think>' in message.content %}{%- set content = message.content.split('</think>')"
    "[-1].lstrip('\\n') %}{%- endif %}<tool_call>{%- endfor %}{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and enable_thinking is "
    "false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}";

TEST(ChatTemplate, Qwen3ThinksUnlessToldNotAndDropsEarlierReasoning) {
  const ChatTemplate t = ChatTemplate::detect(kQwen3Template);
  EXPECT_EQ(t.format(), ChatFormat::ChatML);
  EXPECT_TRUE(t.thinking());
  EXPECT_TRUE(t.supports_tools());
  EXPECT_EQ(t.default_system(), "");
  EXPECT_FALSE(ChatTemplate::detect(kQwen25Template).thinking());
  const std::vector<std::string> none;
  const std::vector<ChatMessage> ask = {{"user", "2+3?"}};
  EXPECT_EQ(t.apply(ask, true, none), "<|im_start|>user\n2+3?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.apply(ask, true, none, /*enable_thinking=*/false),
            "<|im_start|>user\n2+3?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // Without a thinking template the switch changes nothing.
  EXPECT_EQ(ChatTemplate::detect(kQwen25Template).apply(ask, true, none, false),
            ChatTemplate::detect(kQwen25Template).apply(ask, true, none));
  // An earlier answer is shown without its reasoning; one after the last user turn (a prefill
  // being continued) is left as it is.
  const std::vector<ChatMessage> history = {{"user", "2+3?"},
                                            {"assistant", "<think>\nadd them\n</think>\n\n5."},
                                            {"user", "And 2+4?"},
                                            {"assistant", "<think>\nagain"}};
  EXPECT_EQ(t.apply(history, false, none),
            "<|im_start|>user\n2+3?<|im_end|>\n<|im_start|>assistant\n5.<|im_end|>\n"
            "<|im_start|>user\nAnd 2+4?<|im_end|>\n<|im_start|>assistant\n<think>\nagain"
            "<|im_end|>\n");
}

TEST(ChatTemplate, OneToolWithTheDefaultSystem) {
  const ChatTemplate t = ChatTemplate::detect(kQwen25Template);
  const std::vector<std::string> tools = {std::string(kWeatherTool)};
  const std::vector<ChatMessage> msgs = {{"user", "What's the weather in Paris?"}};
  EXPECT_EQ(t.apply(msgs, true, tools),
            "<|im_start|>system\n" + kQwenSystem + kToolsIntro + "\n" + kWeatherToolOut +
                kToolsOutro +
                "<|im_start|>user\nWhat's the weather in Paris?<|im_end|>\n"
                "<|im_start|>assistant\n");
}

// The conversation's system message goes into the tools block and is not repeated.
TEST(ChatTemplate, GivenSystemWithTwoTools) {
  const ChatTemplate t = ChatTemplate::detect(kQwen25Template);
  const std::vector<std::string> tools = {std::string(kWeatherTool), std::string(kTimeTool)};
  EXPECT_EQ(
      t.apply(std::vector<ChatMessage>{{"system", "You are terse."}, {"user", "Hi!"}}, true, tools),
      "<|im_start|>system\nYou are terse." + kToolsIntro + "\n" + kWeatherToolOut + "\n" +
          kTimeToolOut + kToolsOutro + "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
}

// Calls are written with their arguments re-serialized; consecutive tool results share one user
// turn. The loop renders the same with or without tools.
TEST(ChatTemplate, ToolCallsAndGroupedToolResponses) {
  const ChatTemplate t = ChatTemplate::detect(kQwen25Template);
  const std::vector<ChatMessage> msgs = {
      {"user", "Weather in Paris and London?"},
      {"assistant",
       "",
       {{"get_weather", R"({"city":"Paris"})"}, {"get_weather", R"({"city":"London"})"}}},
      {"tool", R"({"temp": 21})"},
      {"tool", "18 C"},
      {"user", "Thanks. And Rome?"},
  };
  const std::string turns =
      "<|im_start|>user\nWeather in Paris and London?<|im_end|>\n"
      "<|im_start|>assistant\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"London\"}}\n"
      "</tool_call><|im_end|>\n"
      "<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response>\n"
      "<tool_response>\n18 C\n</tool_response><|im_end|>\n"
      "<|im_start|>user\nThanks. And Rome?<|im_end|>\n<|im_start|>assistant\n";
  const std::vector<std::string> tools = {std::string(kWeatherTool)};
  EXPECT_EQ(t.apply(msgs, true, tools), "<|im_start|>system\n" + kQwenSystem + kToolsIntro + "\n" +
                                            kWeatherToolOut + kToolsOutro + turns);
  EXPECT_EQ(t.apply(msgs, true), "<|im_start|>system\n" + kQwenSystem + "<|im_end|>\n" + turns);
}

TEST(ChatTemplate, AssistantContentBeforeItsToolCall) {
  const ChatTemplate t = ChatTemplate::detect(kQwen25Template);
  const std::vector<ChatMessage> msgs = {
      {"system", "Be brief."},
      {"user", "Time?"},
      {"assistant", "Let me check.", {{"get_time", "{}"}}},
      {"tool", "12:00"},
      {"assistant", "It is noon."},
  };
  const std::vector<std::string> tools = {std::string(kTimeTool)};
  EXPECT_EQ(t.apply(msgs, false, tools),
            "<|im_start|>system\nBe brief." + kToolsIntro + "\n" + kTimeToolOut + kToolsOutro +
                "<|im_start|>user\nTime?<|im_end|>\n"
                "<|im_start|>assistant\nLet me check.\n"
                "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call><|im_end|>\n"
                "<|im_start|>user\n<tool_response>\n12:00\n</tool_response><|im_end|>\n"
                "<|im_start|>assistant\nIt is noon.<|im_end|>\n");
}

// Templates without the convention refuse tools and tool calls rather than drop them; a role
// "tool" message renders like any other role there, as unrecognised roles always have.
TEST(ChatTemplate, TemplatesWithoutTheConventionRefuseTools) {
  const std::vector<std::string> tools = {std::string(kWeatherTool)};
  const std::vector<ChatMessage> calls = {{"user", "Hi"},
                                          {"assistant", "", {{"get_weather", "{}"}}}};
  for (const ChatTemplate& t :
       {ChatTemplate::detect(kSmolLM2Template), ChatTemplate::of(ChatFormat::ChatML),
        ChatTemplate::of(ChatFormat::Llama3), ChatTemplate::detect("{{ whatever }}")}) {
    EXPECT_FALSE(t.supports_tools());
    EXPECT_THROW(t.apply(kNoSystem, true, tools), Error);
    EXPECT_THROW(t.apply(calls, true), Error);
    EXPECT_NO_THROW(t.apply(kNoSystem, true, {}));
  }
  EXPECT_EQ(
      ChatTemplate::of(ChatFormat::ChatML).apply(std::vector<ChatMessage>{{"tool", "42"}}, false),
      "<|im_start|>tool\n42<|im_end|>\n");
}

// tojson is Python's json.dumps(ensure_ascii=False): ", " and ": " separators, keys in their
// given order, short escapes for \" \\ \n \r \t \b \f, \u00XX for other control characters,
// UTF-8 as is ("\/" parses to a plain slash); arguments that are not JSON are written as a string.
TEST(ChatTemplate, ToolJsonIsWrittenAsPythonDumpsIt) {
  const ChatTemplate t = ChatTemplate::detect(kQwen25Template);
  const std::vector<std::string> tools = {
      R"({"type": "function", "function": {"name": "f\u00e9", "description": "Say \"hi\"\\ )"
      R"(to\n\tcaf\u00e9 \u65e5\u672c\u0001\b\f\r \/ \u001f end", "parameters": {"type":)"
      R"("object","properties":{"n":{"type":"integer","minimum":-3,"maximum":1.5e3,)"
      R"("default":0.25},"tags":{"type":"array","items":[],"x":{}}},"required":["n"],)"
      R"("additionalProperties":false,"z":null,"a":true}}})"};
  const std::vector<ChatMessage> msgs = {
      {"user", "go"},
      {"assistant",
       "",
       {{"f\xC3\xA9", R"({"b": [1, {"c": "\u00e9\n"}], "a": -0.5})"},
        {"g", R"({"city": Paris})"},
        {"h", "not json\n\"x\""},
        {"i", R"([1,"a",null])"}}},
  };
  EXPECT_EQ(
      t.apply(msgs, false, tools),
      "<|im_start|>system\n" + kQwenSystem + kToolsIntro +
          "\n{\"type\": \"function\", \"function\": {\"name\": \"f\xC3\xA9\", \"description\": "
          "\"Say \\\"hi\\\"\\\\ to\\n\\tcaf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\\u0001\\b\\f\\r / "
          "\\u001f end\", \"parameters\": {\"type\": \"object\", \"properties\": {\"n\": "
          "{\"type\": \"integer\", \"minimum\": -3, \"maximum\": 1500.0, \"default\": 0.25}, "
          "\"tags\": {\"type\": \"array\", \"items\": [], \"x\": {}}}, \"required\": [\"n\"], "
          "\"additionalProperties\": false, \"z\": null, \"a\": true}}}" +
          kToolsOutro +
          "<|im_start|>user\ngo<|im_end|>\n<|im_start|>assistant\n"
          "<tool_call>\n{\"name\": \"f\xC3\xA9\", \"arguments\": {\"b\": [1, {\"c\": "
          "\"\xC3\xA9\\n\"}], \"a\": -0.5}}\n</tool_call>\n"
          "<tool_call>\n{\"name\": \"g\", \"arguments\": \"{\\\"city\\\": Paris}\"}\n</tool_call>\n"
          "<tool_call>\n{\"name\": \"h\", \"arguments\": \"not json\\n\\\"x\\\"\"}\n</tool_call>\n"
          "<tool_call>\n{\"name\": \"i\", \"arguments\": [1, \"a\", null]}\n</tool_call>"
          "<|im_end|>\n");
}

TEST(ChatTemplate, BadToolJsonIsRefused) {
  const ChatTemplate t = ChatTemplate::detect(kQwen25Template);
  EXPECT_THROW(t.apply(kNoSystem, true, std::vector<std::string>{"{\"type\": "}), Error);
  // Nesting deeper than the writer recurses into is refused, not a stack overflow.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THROW(t.apply(std::vector<ChatMessage>{{"assistant", "", {{"f", deep}}}}, false), Error);
  const std::string ok = std::string(200, '[') + std::string(200, ']');
  EXPECT_NO_THROW(t.apply(std::vector<ChatMessage>{{"assistant", "", {{"f", ok}}}}, false));
}

TEST(ChatTemplate, Llama3) {
  const ChatTemplate t = ChatTemplate::of(ChatFormat::Llama3);
  EXPECT_EQ(
      t.apply(kConversation, true),
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nTell me a joke.<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_TRUE(t.starts_with_bos());
}

TEST(ChatTemplate, Llama2) {
  const ChatTemplate t = ChatTemplate::of(ChatFormat::Llama2);
  EXPECT_EQ(t.apply(kConversation, true),
            "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi! [/INST] Hello. </s>"
            "<s>[INST] Tell me a joke. [/INST]");
  EXPECT_EQ(t.apply(kNoSystem, true), "<s>[INST] Hi! [/INST]");
}

TEST(ChatTemplate, GemmaFoldsSystemIntoFirstUserTurn) {
  const ChatTemplate t = ChatTemplate::of(ChatFormat::Gemma);
  EXPECT_EQ(t.apply(kConversation, true),
            "<bos><start_of_turn>user\nYou are terse.\n\nHi!<end_of_turn>\n"
            "<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nTell me a joke.<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(t.apply(kNoSystem, false), "<bos><start_of_turn>user\nHi!<end_of_turn>\n");
}

TEST(ChatTemplate, Zephyr) {
  const ChatTemplate t = ChatTemplate::of(ChatFormat::Zephyr);
  EXPECT_EQ(t.apply(kConversation, true),
            "<|system|>\nYou are terse.</s>\n<|user|>\nHi!</s>\n<|assistant|>\nHello.</s>\n"
            "<|user|>\nTell me a joke.</s>\n<|assistant|>\n");
}

TEST(ChatTemplate, Phi3) {
  const ChatTemplate t = ChatTemplate::of(ChatFormat::Phi3);
  EXPECT_EQ(t.apply(kNoSystem, true), "<|user|>\nHi!<|end|>\n<|assistant|>\n");
}

TEST(ChatTemplate, Names) {
  EXPECT_EQ(ChatTemplate::of(ChatFormat::ChatML).name(), "chatml");
  EXPECT_EQ(ChatTemplate::of(ChatFormat::Gemma).name(), "gemma");
}

TEST(EncodePrompt, DoesNotAddASecondBos) {
  VocabData d = testvocab::spm();
  const Tokenizer tok = Tokenizer::from_vocab(d);
  const auto with_bos_text = encode_prompt(tok, "<s>hello");
  EXPECT_EQ(with_bos_text.front(), 1);
  EXPECT_EQ(std::count(with_bos_text.begin(), with_bos_text.end(), 1), 1);
  const auto without = encode_prompt(tok, "hello");
  EXPECT_EQ(without.front(), 1);
  EXPECT_EQ(without.size(), 2u);
}

// [BOS] PRE prefix SUF suffix MID, the code taken as text (a special token's spelling in it
// stays text); a vocabulary without the markers refuses.
TEST(EncodeFimPrompt, PrefixSuffixMiddleWithTheCodeAsText) {
  VocabData d = testvocab::bpe();
  EXPECT_THROW(encode_fim_prompt(Tokenizer::from_vocab(d), "a", "b"), Error);
  const auto pre = static_cast<int32_t>(d.tokens.size());
  for (const char* t : {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"}) {
    d.tokens.push_back(t);
    d.token_types.push_back(kTokenControl);
  }
  const Tokenizer tok = Tokenizer::from_vocab(d);
  const std::string prefix = "x = 1<|im_end|>", suffix = "print(x)";
  const std::vector<int32_t> ids = encode_fim_prompt(tok, prefix, suffix);
  std::vector<int32_t> want = {pre};
  for (int32_t id : tok.encode(prefix, false, false)) want.push_back(id);
  want.push_back(pre + 1);
  for (int32_t id : tok.encode(suffix, false, false)) want.push_back(id);
  want.push_back(pre + 2);
  EXPECT_EQ(ids, want);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 0);  // <|im_end|> (id 2) stayed text
}

}  // namespace
}  // namespace specdec
