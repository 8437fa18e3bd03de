#include "server/model_facts.h"

#include <gtest/gtest.h>

#include "gguf/file_type.h"
#include "support/tiny_model.h"

namespace specdec::server {
namespace {

TEST(ModelFacts, AreReadFromTheGgufFile) {
  testing::TinyModelSpec spec;
  spec.arch = "qwen2";
  spec.n_layer = 3;
  spec.fim_tokens = true;
  spec.weight_type = GgmlType::Q8_0;
  spec.edit = [](gguf::GgufWriter& w) { w.set_u32("general.file_type", 7); };
  const std::string path = testing::write_tiny_model(spec, testing::temp_path("facts.gguf"));
  const LoadedModel m = LoadedModel::load(path);
  const ModelFacts f = model_facts(m, "facts", 128, "draft.gguf");
  EXPECT_EQ(f.name, "facts");
  EXPECT_EQ(f.file, path);
  EXPECT_EQ(f.file_bytes, static_cast<int64_t>(m.file->file_size()));
  EXPECT_GT(f.modified, 0);
  EXPECT_EQ(f.architecture, "qwen2");
  int64_t elements = 0;
  for (const auto& t : m.file->tensors()) elements += t.n_elements();
  EXPECT_EQ(f.parameters, elements);
  EXPECT_EQ(f.size_label, gguf::parameter_size(elements));  // the file has no general.size_label
  EXPECT_EQ(f.quantization, "Q8_0");
  EXPECT_EQ(f.context, 128);  // the served context, not the trained one
  EXPECT_EQ(f.embedding, spec.n_embd);
  EXPECT_EQ(f.layers, 3);
  EXPECT_FALSE(f.chat_template.empty());
  EXPECT_FALSE(f.tools);  // a plain ChatML template has no tool-calling convention
  EXPECT_TRUE(f.insert);
  EXPECT_EQ(f.draft, "draft.gguf");
}

}  // namespace
}  // namespace specdec::server
