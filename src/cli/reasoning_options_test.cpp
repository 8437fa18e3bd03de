#include "cli/reasoning_options.h"

#include <gtest/gtest.h>

#include <sstream>

#include "common/error.h"

namespace specdec::cli {
namespace {

ReasoningOptions parsed(std::vector<std::string> args) {
  ReasoningOptions o;
  ArgParser p("specdec run", "test");
  add_reasoning_options(p, o);
  EXPECT_TRUE(p.parse(args));
  return o;
}

std::string error_of(std::vector<std::string> args) {
  try {
    parsed(std::move(args));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Qwen3's template as ChatTemplate recognises it: ChatML that writes the <think> tags.
constexpr const char* kThinkingChatML =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant"
    "\\n' }}{% endif %}{%- if enable_thinking is false %}<think></think>{% endif %}";

TEST(ReasoningOptions, DefaultsLeaveThinkingAlone) {
  const ReasoningOptions o = parsed({});
  EXPECT_EQ(o.budget, -1);
  EXPECT_TRUE(thinking_enabled(o));
  GenerationOptions go;
  go.reasoning_budget = 7;
  apply_reasoning_options(o, go);
  EXPECT_EQ(go.reasoning_budget, -1);
  EXPECT_EQ(go.reasoning_budget_message, "");
}

TEST(ReasoningOptions, ABudgetAndItsMessageReachEveryGeneration) {
  const ReasoningOptions o =
      parsed({"--reasoning-budget", "64", "--reasoning-budget-message", " Enough."});
  EXPECT_TRUE(thinking_enabled(o));
  GenerationOptions go;
  apply_reasoning_options(o, go);
  EXPECT_EQ(go.reasoning_budget, 64);
  EXPECT_EQ(go.reasoning_budget_message, " Enough.");
}

TEST(ReasoningOptions, ZeroMeansNoThinking) {
  const ReasoningOptions o = parsed({"--reasoning-budget", "0"});
  EXPECT_FALSE(thinking_enabled(o));
  GenerationOptions go;
  apply_reasoning_options(o, go);
  EXPECT_EQ(go.reasoning_budget, 0);  // a block left open is closed at once
  // The chat prompt then carries the empty block, as Qwen3's template writes it.
  const ChatTemplate t = ChatTemplate::detect(kThinkingChatML);
  ASSERT_TRUE(t.thinking());
  const std::vector<ChatMessage> msgs = {{"user", "hi"}};
  const std::string off = t.apply(msgs, true, {}, thinking_enabled(o));
  EXPECT_TRUE(off.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n")) << off;
  EXPECT_EQ(t.apply(msgs, true, {}, thinking_enabled(parsed({}))), t.apply(msgs, true));
}

TEST(ReasoningOptions, BadValuesNameTheFlag) {
  EXPECT_NE(error_of({"--reasoning-budget", "-2"}).find("--reasoning-budget must be -1"),
            std::string::npos);
  EXPECT_NE(error_of({"--reasoning-budget", "3000000000"}).find("--reasoning-budget must be"),
            std::string::npos);
  EXPECT_NE(error_of({"--reasoning-budget", "many"}).find("--reasoning-budget"), std::string::npos);
}

TEST(ReasoningOptions, ATemplateWithoutThinkingGetsANote) {
  std::ostringstream log;
  const ChatTemplate plain = ChatTemplate::of(ChatFormat::ChatML);
  note_reasoning_options(parsed({}), plain, log);
  EXPECT_EQ(log.str(), "");  // nothing asked, nothing said
  note_reasoning_options(parsed({"--reasoning-budget", "5"}), plain, log);
  EXPECT_NE(log.str().find("does not think in <think> tags; --reasoning-budget changes nothing"),
            std::string::npos)
      << log.str();
  std::ostringstream quiet;
  note_reasoning_options(parsed({"--reasoning-budget", "5"}), ChatTemplate::detect(kThinkingChatML),
                         quiet);
  EXPECT_EQ(quiet.str(), "");
}

}  // namespace
}  // namespace specdec::cli
