// The embedding endpoints' request forms and response shapes: OpenAI's, llama-server's and
// Ollama's, each bad input a 400 naming its field.
#include "server/embeddings_api.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/error.h"

namespace specdec::server {
namespace {

using nlohmann::json;

void expect_400(EmbeddingApi api, const std::string& body, const std::string& param,
                const std::string& code) {
  try {
    parse_embedding_request(api, body);
    ADD_FAILURE() << "no error for " << body;
  } catch (const ApiError& err) {
    EXPECT_EQ(err.status(), 400) << body;
    EXPECT_EQ(err.param(), param) << body << ": " << err.what();
    EXPECT_EQ(err.code(), code) << body << ": " << err.what();
  }
}

TEST(EmbeddingsApi, OpenAIsInputFormsAndOptions) {
  EmbeddingRequest r =
      parse_embedding_request(EmbeddingApi::OpenAI, R"({"input":"hi","model":"m"})");
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0].text, "hi");
  EXPECT_EQ(r.model, "m");
  EXPECT_FALSE(r.base64);
  EXPECT_EQ(r.normalize, 2);
  EXPECT_FALSE(r.truncate);
  EXPECT_FALSE(r.dimensions.has_value());
  r = parse_embedding_request(EmbeddingApi::OpenAI,
                              R"({"input":["a",[1,2],"b"],"encoding_format":"base64",
                                  "dimensions":64,"embd_normalize":-1})");
  ASSERT_EQ(r.inputs.size(), 3u);
  EXPECT_EQ(*r.inputs[1].tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(r.inputs[2].text, "b");
  EXPECT_TRUE(r.base64);
  EXPECT_EQ(*r.dimensions, 64);
  EXPECT_EQ(r.normalize, -1);
  r = parse_embedding_request(EmbeddingApi::OpenAI, R"({"input":[5,6,7]})");
  ASSERT_EQ(r.inputs.size(), 1u);  // one input of token ids
  EXPECT_EQ(*r.inputs[0].tokens, (std::vector<int32_t>{5, 6, 7}));
  // llama-server's own endpoint reads "content" too.
  r = parse_embedding_request(EmbeddingApi::Native, R"({"content":"text"})");
  EXPECT_EQ(r.inputs[0].text, "text");

  expect_400(EmbeddingApi::OpenAI, "{}", "input", "missing_required");
  expect_400(EmbeddingApi::OpenAI, R"({"input":""})", "input", "invalid_value");
  expect_400(EmbeddingApi::OpenAI, R"({"input":["a",""]})", "input", "invalid_value");
  expect_400(EmbeddingApi::OpenAI, R"({"input":[]})", "input", "invalid_value");
  expect_400(EmbeddingApi::OpenAI, R"({"input":3})", "input", "invalid_type");
  expect_400(EmbeddingApi::OpenAI, R"({"input":["a",{}]})", "input[1]", "invalid_type");
  expect_400(EmbeddingApi::OpenAI, R"({"input":[1,-2]})", "input", "invalid_value");
  expect_400(EmbeddingApi::OpenAI, R"({"input":"a","encoding_format":"hex"})", "encoding_format",
             "invalid_value");
  expect_400(EmbeddingApi::OpenAI, R"({"input":"a","dimensions":0})", "dimensions",
             "invalid_value");
  expect_400(EmbeddingApi::OpenAI, R"({"input":"a","embd_normalize":-2})", "embd_normalize",
             "invalid_value");
  expect_400(EmbeddingApi::OpenAI, R"({"input":"a","model":3})", "model", "invalid_type");
  expect_400(EmbeddingApi::OpenAI, "[1]", "body", "invalid_type");
  expect_400(EmbeddingApi::OpenAI, "{", "", "invalid_json");
  json many = {{"input", json::array()}};
  for (size_t i = 0; i <= kMaxEmbeddingInputs; ++i) many["input"].push_back("x");
  expect_400(EmbeddingApi::OpenAI, many.dump(), "input", "invalid_value");
}

TEST(EmbeddingsApi, OllamasForms) {
  EmbeddingRequest r = parse_embedding_request(
      EmbeddingApi::Ollama, R"({"model":"m","input":["a","b"],"truncate":false,"dimensions":8})");
  EXPECT_EQ(r.inputs.size(), 2u);
  EXPECT_FALSE(r.truncate);
  EXPECT_EQ(*r.dimensions, 8);
  EXPECT_EQ(r.normalize, 2);
  r = parse_embedding_request(EmbeddingApi::Ollama, R"({"model":"m","input":"a"})");
  EXPECT_TRUE(r.truncate);
  // No input, or an empty one, loads the model and embeds nothing.
  EXPECT_TRUE(parse_embedding_request(EmbeddingApi::Ollama, R"({"model":"m"})").inputs.empty());
  EXPECT_TRUE(
      parse_embedding_request(EmbeddingApi::Ollama, R"({"model":"m","input":""})").inputs.empty());
  // The older endpoint: "prompt", not normalized.
  r = parse_embedding_request(EmbeddingApi::OllamaLegacy, R"({"model":"m","prompt":"a"})");
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.normalize, -1);
  expect_400(EmbeddingApi::Ollama, R"({"input":"a"})", "model", "missing_required");
  expect_400(EmbeddingApi::OllamaLegacy, R"({"model":"","prompt":"a"})", "model",
             "missing_required");
  expect_400(EmbeddingApi::Ollama, R"({"model":"m","input":[1,2]})", "input[0]", "invalid_type");
  expect_400(EmbeddingApi::Ollama, R"({"model":"m","input":"a","truncate":"no"})", "truncate",
             "invalid_type");
  expect_400(EmbeddingApi::OllamaLegacy, R"({"model":"m","prompt":["a","b"]})", "prompt",
             "invalid_type");
  expect_400(EmbeddingApi::OllamaLegacy, R"({"model":"m","prompt":["a"]})", "prompt",
             "invalid_type");
}

TEST(EmbeddingsApi, Base64IsTheFloatsLittleEndianBytes) {
  // 1.0f = 00 00 80 3f, -2.0f = 00 00 00 c0.
  EXPECT_EQ(embedding_base64({1.0f}), "AACAPw==");
  EXPECT_EQ(embedding_base64({1.0f, -2.0f}), "AACAPwAAAMA=");
  EXPECT_EQ(embedding_base64({1.0f, -2.0f, 0.0f}), "AACAPwAAAMAAAAAA");
  EXPECT_EQ(embedding_base64({}), "");
}

TEST(EmbeddingsApi, ShorterVectorsAreNormalizedAgain) {
  std::vector<float> v = {3, 4, 12};
  shorten_embedding(v, 2, 2);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_NEAR(v[0], 0.6f, 1e-6);
  EXPECT_NEAR(v[1], 0.8f, 1e-6);
  std::vector<float> w = {3, 4, 12};
  shorten_embedding(w, 8, -1);  // longer than the vector: kept whole
  EXPECT_EQ(w, (std::vector<float>{3, 4, 12}));
  EXPECT_THROW(shorten_embedding(w, 0, 2), Error);
}

TEST(EmbeddingsApi, EachClientGetsItsShape) {
  const std::vector<std::vector<std::vector<float>>> vectors = {{{1, 0}}, {{0, 1}}};
  EmbeddingRequest r;
  r.api = EmbeddingApi::OpenAI;
  json j = embeddings_json(r, "m", vectors, 7, 12.5);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["usage"], json({{"prompt_tokens", 7}, {"total_tokens", 7}}));
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["data"][1], json({{"object", "embedding"}, {"index", 1}, {"embedding", {0, 1}}}));
  r.base64 = true;
  EXPECT_EQ(embeddings_json(r, "m", vectors, 7, 1)["data"][0]["embedding"], "AACAPwAAAAA=");

  r.api = EmbeddingApi::Native;  // per token with pooling none: a list of vectors per input
  j = embeddings_json(r, "m", {{{1, 2}, {3, 4}}}, 2, 1);
  EXPECT_EQ(j, json::parse(R"([{"index":0,"embedding":[[1,2],[3,4]]}])"));

  r.api = EmbeddingApi::Ollama;
  j = embeddings_json(r, "m", vectors, 7, 12.5);
  EXPECT_EQ(j["embeddings"], json::parse("[[1,0],[0,1]]"));
  EXPECT_EQ(j["prompt_eval_count"], 7);
  EXPECT_EQ(j["total_duration"], 12'500'000);
  EXPECT_EQ(j["model"], "m");

  r.api = EmbeddingApi::OllamaLegacy;
  EXPECT_EQ(embeddings_json(r, "m", {{{1, 0}}}, 1, 1), json::parse(R"({"embedding":[1,0]})"));
  EXPECT_EQ(embeddings_json(r, "m", {}, 0, 1), json::parse(R"({"embedding":[]})"));
}

}  // namespace
}  // namespace specdec::server
