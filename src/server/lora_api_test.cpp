#include "server/lora_api.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "server/api_error.h"

namespace specdec::server {
namespace {

using nlohmann::json;

std::vector<ActiveLora> two_adapters() {
  auto a = std::make_shared<LoraAdapter>();
  a->path = "/models/a.gguf";
  auto b = std::make_shared<LoraAdapter>();
  b->path = "/models/b.gguf";
  return {{a, 1.0f}, {b, 0.25f}};
}

// The param of the 400 a check gives, or "" when it passes.
std::string refused(const json& lora, const std::vector<ActiveLora>& adapters) {
  try {
    check_lora_entries(parse_lora_entries(lora, "lora"), adapters, "lora");
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param();
  }
  return "";
}

TEST(LoraApi, TheAdaptersAreListedInLlamaServersShape) {
  EXPECT_EQ(lora_adapters_json(two_adapters()),
            json::parse(R"([{"id":0,"path":"/models/a.gguf","scale":1.0},
                            {"id":1,"path":"/models/b.gguf","scale":0.25}])"));
  EXPECT_EQ(lora_adapters_json({}), json::array());
}

TEST(LoraApi, OnlyTheRunningScalesAreAccepted) {
  const std::vector<ActiveLora> adapters = two_adapters();
  EXPECT_EQ(refused(json::array(), adapters), "");
  EXPECT_EQ(refused(json::parse(R"([{"id":1,"scale":0.25},{"id":0,"scale":1}])"), adapters), "");
  EXPECT_EQ(refused(json::parse(R"([{"id":0,"scale":1},{"id":1,"scale":0.5}])"), adapters),
            "lora[1].scale");
  EXPECT_EQ(refused(json::parse(R"([{"id":2,"scale":1}])"), adapters), "lora[0].id");
  EXPECT_EQ(refused(json::parse(R"([{"id":-1,"scale":1}])"), adapters), "lora[0].id");
  EXPECT_EQ(refused(json::parse(R"([{"id":0,"scale":1}])"), {}), "lora[0].id");
}

TEST(LoraApi, MalformedListsNameTheField) {
  const std::vector<ActiveLora> adapters = two_adapters();
  EXPECT_EQ(refused(json::parse(R"({"id":0,"scale":1})"), adapters), "lora");
  EXPECT_EQ(refused(json::parse(R"([3])"), adapters), "lora[0]");
  EXPECT_EQ(refused(json::parse(R"([{"scale":1}])"), adapters), "lora[0].id");
  EXPECT_EQ(refused(json::parse(R"([{"id":0.5,"scale":1}])"), adapters), "lora[0].id");
  EXPECT_EQ(refused(json::parse(R"([{"id":0,"scale":"1"}])"), adapters), "lora[0].scale");
  EXPECT_EQ(refused(json::parse(R"([{"id":0}])"), adapters), "lora[0].scale");
}

}  // namespace
}  // namespace specdec::server
