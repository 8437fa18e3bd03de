#include "cli/memory_report.h"

#include <gtest/gtest.h>

#include "support/tiny_model.h"

namespace specdec::cli {
namespace {

TEST(MemoryReport, DescribesEachPart) {
  ModelMemory m;
  m.weight_bytes = 3u << 20;
  m.mapped_resident = 1u << 20;
  m.packed_bytes = 2u << 20;
  m.released_bytes = 1536u << 10;
  m.kv_cache_bytes = 4u << 20;
  m.scratch_bytes = 512;
  EXPECT_EQ(describe_memory(m, 128),
            "weights 3.0 MiB mapped (1.0 MiB of the file resident), packed copies 2.0 MiB "
            "(1.5 MiB of the mapping released), KV cache 4.0 MiB (128 tokens, f32), scratch "
            "512 B");
  m.kv_types = {KvType::Q8_0, KvType::F16};
  EXPECT_NE(describe_memory(m, 128).find("KV cache 4.0 MiB (128 tokens, K q8_0, V f16)"),
            std::string::npos);
  m.kv_types = {KvType::Q8_0, KvType::Q8_0};
  EXPECT_NE(describe_memory(m, 128).find("(128 tokens, q8_0)"), std::string::npos);
  m.mapped_resident.reset();  // no pagemap: the residency is left out, not guessed
  EXPECT_EQ(describe_memory(m, 128).find("resident"), std::string::npos);
  // --no-mmap: the file is in anonymous memory, so neither "mapped" nor a mapping released;
  // what packing replaced is freed from the read copy instead.
  m.file_read = true;
  EXPECT_EQ(describe_memory(m, 128),
            "weights 3.0 MiB read into memory (--no-mmap), packed copies 2.0 MiB (1.5 MiB of the "
            "read copy freed), KV cache 4.0 MiB (128 tokens, q8_0), scratch 512 B");

  ProcessMemory p;
  EXPECT_NE(describe_process(p).find("unknown"), std::string::npos);
  p = {true, 10u << 20, 12u << 20, 4u << 20, 6u << 20};
  EXPECT_EQ(describe_process(p),
            "resident 10.0 MiB (6.0 MiB file pages, 4.0 MiB anonymous), peak 12.0 MiB (VmRSS, "
            "RssFile, RssAnon, VmHWM)");
}

TEST(MemoryReport, ReportsBothModelsAndTheProcess) {
  testing::TinyModelSpec spec;
  spec.weight_type = GgmlType::Q8_0;
  spec.n_embd = 128;
  LoadedModel target =
      LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("mr_t.gguf")));
  spec.n_layer = 1;
  LoadedModel draft =
      LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("mr_d.gguf")));
  const ModelMemory t = model_memory(target, 64);
  EXPECT_EQ(t.file_bytes, target.file->file_size());
  EXPECT_EQ(t.weight_bytes, target.model->weight_bytes());
  EXPECT_GT(t.packed_bytes, 0u);
  EXPECT_EQ(t.released_bytes, target.model->released_weight_bytes());
  EXPECT_EQ(t.kv_cache_bytes, KvCache(target.model->config(), 64).bytes());
  if (t.mapped_resident) {
    EXPECT_LE(*t.mapped_resident, (t.file_bytes + 4095) / 4096 * 4096);
  }

  const ProcessMemory p = read_process_memory();
  const std::string text = format_memory(target, &draft, 64, p);
  EXPECT_EQ(text.rfind("memory:    target weights ", 0), 0u) << text;
  EXPECT_NE(text.find("\n           draft  weights "), std::string::npos) << text;
  EXPECT_NE(text.find("\nprocess:   "), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);

  const nlohmann::json j = memory_to_json(target, &draft, 64, p);
  for (const char* model : {"target", "draft"}) {
    for (const char* key :
         {"file_bytes", "weight_bytes", "packed_bytes", "released_bytes", "kv_cache_bytes",
          "kv_cache_tokens", "kv_cache_type_k", "kv_cache_type_v", "scratch_bytes"}) {
      EXPECT_TRUE(j[model].contains(key)) << model << "." << key;
    }
  }
  EXPECT_EQ(j["draft"]["packed_bytes"], draft.model->packed_weight_bytes());
  EXPECT_EQ(j["target"]["file_access"], "map");
  if (p.ok) {
    EXPECT_EQ(j["process"]["rss_bytes"], p.rss);
    EXPECT_GE(j["process"]["peak_rss_bytes"].get<size_t>(), p.rss);
  }
  EXPECT_FALSE(memory_to_json(target, nullptr, 64, p).contains("draft"));
  const nlohmann::json q8 = memory_to_json(target, &draft, 64, p, {KvType::Q8_0, KvType::F16});
  EXPECT_EQ(q8["draft"]["kv_cache_type_k"], "q8_0");
  EXPECT_EQ(q8["draft"]["kv_cache_type_v"], "f16");
  EXPECT_EQ(q8["target"]["kv_cache_bytes"],
            KvCache(target.model->config(), 64, {KvType::Q8_0, KvType::F16}).bytes());
}

TEST(MemoryReport, SaysWhenTheFileWasReadNotMapped) {
  testing::TinyModelSpec spec;
  spec.weight_type = GgmlType::Q8_0;
  spec.n_embd = 128;
  const std::string path = testing::write_tiny_model(spec, testing::temp_path("mr_read.gguf"));
  LoadedModel read = LoadedModel::load(path, ModelLoadOptions{}, gguf::GgufFile::Access::Read);
  const ModelMemory m = model_memory(read, 64);
  EXPECT_TRUE(m.file_read);
  // The packed matrices' pages are freed from the read copy, as from a mapping.
  EXPECT_GT(m.released_bytes, 0u);
  EXPECT_EQ(m.released_bytes, model_memory(LoadedModel::load(path), 64).released_bytes);
  const std::string text = describe_memory(m, 64);
  EXPECT_NE(text.find("read into memory (--no-mmap)"), std::string::npos) << text;
  EXPECT_EQ(text.find("mapped"), std::string::npos) << text;
  EXPECT_EQ(text.find("mapping"), std::string::npos) << text;
  EXPECT_EQ(memory_to_json(read, nullptr, 64, read_process_memory())["target"]["file_access"],
            "read");
  EXPECT_FALSE(model_memory(LoadedModel::load(path), 64).file_read);
}

}  // namespace
}  // namespace specdec::cli
