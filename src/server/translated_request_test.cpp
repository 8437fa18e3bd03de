#include "server/translated_request.h"

#include <gtest/gtest.h>

namespace specdec::server {
namespace {

TEST(TranslatedRequest, PrefixesRenameWholeFieldsOnly) {
  EXPECT_EQ(renamed_prefix("stop", "stop", "stop_sequences"), "stop_sequences");
  EXPECT_EQ(renamed_prefix("tools[2].name", "tools", "t"), "t[2].name");
  EXPECT_EQ(renamed_prefix("a.b", "a", ""), ".b");
  EXPECT_EQ(renamed_prefix(".function", ".function", ""), "");  // a match that leaves nothing
  EXPECT_EQ(renamed_prefix("stop_token_ids", "stop", "x"), std::nullopt);
  EXPECT_EQ(renamed_prefix("sto", "stop", "x"), std::nullopt);
}

TEST(TranslatedRequest, ToolFunctionFieldsSplitIntoIndexAndRest) {
  const auto split = [](const std::string& p) {
    const auto t = tool_function_param(p);
    return t ? t->index + "|" + t->rest : std::string("none");
  };
  EXPECT_EQ(split("tools[3].function.parameters.x"), "[3]|.parameters.x");
  EXPECT_EQ(split("tools[12].function"), "[12]|");
  EXPECT_EQ(split("tools[0].type"), "none");
  EXPECT_EQ(split("tools[0].functions"), "none");
  EXPECT_EQ(split("tools"), "none");
  EXPECT_EQ(split("tool_choice"), "none");
}

TEST(TranslatedRequest, ChatErrorsComeBackUnderTheClientsNames) {
  const auto rename = [](const std::string& p) {
    return renamed_prefix(p, "max_tokens", "max_output_tokens").value_or(p);
  };
  nlohmann::ordered_json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                 {"max_tokens", 0}};
  try {
    parse_translated_chat(body, rename);
    ADD_FAILURE() << "accepted max_tokens 0";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "max_output_tokens");
    EXPECT_NE(std::string(e.what()).find("'max_output_tokens'"), std::string::npos) << e.what();
  }
  body["max_tokens"] = 5;
  EXPECT_EQ(parse_translated_chat(body, rename).max_tokens, 5);
  // A field the renaming leaves alone keeps its name.
  body["temperature"] = 9;
  try {
    parse_translated_chat(body, rename);
    ADD_FAILURE() << "accepted temperature 9";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "temperature");
  }
}

TEST(TranslatedRequest, BodiesAreObjectsOfBoundedDepth) {
  EXPECT_TRUE(parse_translated_body(R"({"b": 1, "a": 2})").begin().key() == "b");  // ordered
  EXPECT_THROW(parse_translated_body("[1]"), ApiError);
  EXPECT_THROW(parse_translated_body("{"), ApiError);
  EXPECT_THROW(parse_translated_body(std::string(1000, '[')), ApiError);
}

}  // namespace
}  // namespace specdec::server
