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

// The scales a list asks for of n adapters; the param of the 400 it gives instead in *param.
std::vector<float> scales_of(const json& lora, size_t n, std::string* param = nullptr) {
  try {
    return lora_scales_of(parse_lora_entries(lora, "lora"), n, "lora");
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    if (param != nullptr) *param = e.param();
    return {-1.0f};
  }
}

std::string refused(const json& lora, size_t n) {
  std::string param;
  scales_of(lora, n, &param);
  return param;
}

TEST(LoraApi, TheAdaptersAreListedInLlamaServersShapeAtTheScalesGiven) {
  const std::vector<ActiveLora> adapters = two_adapters();
  EXPECT_EQ(lora_adapters_json(adapters, std::vector<float>{0.5f, 0.0f}),
            json::parse(R"([{"id":0,"path":"/models/a.gguf","scale":0.5},
                            {"id":1,"path":"/models/b.gguf","scale":0.0}])"));
  EXPECT_EQ(lora_adapters_json({}, {}), json::array());
}

TEST(LoraApi, AListSetsTheScalesItNamesAndTheOthersToZero) {
  // llama-server's construct_lora_list: listed ids at their scale, the rest at 0.
  EXPECT_EQ(scales_of(json::parse(R"([{"id":1,"scale":0.25}])"), 2),
            (std::vector<float>{0.0f, 0.25f}));
  EXPECT_EQ(scales_of(json::parse(R"([{"id":1,"scale":0.25},{"id":0,"scale":-2}])"), 2),
            (std::vector<float>{-2.0f, 0.25f}));
  EXPECT_EQ(scales_of(json::parse(R"([{"id":0,"scale":1},{"id":0,"scale":3}])"), 2),
            (std::vector<float>{3.0f, 0.0f}));  // the last entry naming one wins
  EXPECT_EQ(scales_of(json::array(), 2), (std::vector<float>{0.0f, 0.0f}));
  EXPECT_EQ(refused(json::parse(R"([{"id":2,"scale":1}])"), 2), "lora[0].id");
  EXPECT_EQ(refused(json::parse(R"([{"id":0,"scale":1},{"id":-1,"scale":1}])"), 2), "lora[1].id");
  EXPECT_EQ(refused(json::parse(R"([{"id":0,"scale":1}])"), 0), "lora[0].id");
  EXPECT_EQ(refused(json::parse(R"([{"id":0,"scale":1e300}])"), 2), "lora[0].scale");
}

TEST(LoraApi, MalformedListsNameTheField) {
  EXPECT_EQ(refused(json::parse(R"({"id":0,"scale":1})"), 2), "lora");
  EXPECT_EQ(refused(json::parse(R"([3])"), 2), "lora[0]");
  EXPECT_EQ(refused(json::parse(R"([{"scale":1}])"), 2), "lora[0].id");
  EXPECT_EQ(refused(json::parse(R"([{"id":0.5,"scale":1}])"), 2), "lora[0].id");
  EXPECT_EQ(refused(json::parse(R"([{"id":0,"scale":"1"}])"), 2), "lora[0].scale");
  EXPECT_EQ(refused(json::parse(R"([{"id":0}])"), 2), "lora[0].scale");
}

}  // namespace
}  // namespace specdec::server
