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
