#include "engine/model_catalog.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "support/tiny_model.h"

namespace specdec {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// A target, a draft with its vocabulary and far fewer parameters, and a model of another
// vocabulary, spread over an Ollama store, a Hugging Face hub cache and a directory.
struct Machine {
  fs::path root = fs::path(testing::temp_path("machine"));
  fs::path ollama = root / "ollama", hf = root / "hub", dir = root / "dir";
  ModelStores stores{{ollama.string()}, {hf.string()}};

  Machine() {
    testing::TinyModelSpec big;
    big.n_embd = 256;
    big.n_ff = 1024;
    big.n_layer = 4;
    testing::TinyModelSpec small;  // the same vocabulary (the writer's), 64 wide, 2 layers
    testing::TinyModelSpec other;
    other.n_vocab = 320;  // more padding tokens: another vocabulary
    const std::string digest(64, 'c');
    fs::create_directories(ollama / "blobs");
    testing::write_tiny_model(big, (ollama / "blobs" / ("sha256-" + digest)).string());
    const std::string manifest =
        R"({"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:)" +
        digest + R"("}]})";
    write(ollama / "manifests/registry.ollama.ai/library/big/latest", manifest);
    write(ollama / "manifests/registry.ollama.ai/library/big/7b", manifest);  // the same blob
    write(ollama / "manifests/registry.ollama.ai/library/gone/latest",
          R"({"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:)" +
              std::string(64, 'd') + R"("}]})");
    const fs::path snap = hf / "models--org--small-GGUF/snapshots/r1";
    write(hf / "models--org--small-GGUF/refs/main", "r1");
    fs::create_directories(snap);
    testing::write_tiny_model(small, (snap / "small-q8_0.gguf").string());
    write(snap / "mmproj-small.gguf", "not a language model");
    write(hf / "models--org--small-GGUF/snapshots/r0/old-only.gguf", "an older revision's");
    // Two snapshots and no refs/main: which one is meant cannot be told.
    write(hf / "models--org--twice/snapshots/a/m.gguf", "GGUF");
    write(hf / "models--org--twice/snapshots/b/m.gguf", "GGUF");
    fs::create_directories(dir);
    testing::write_tiny_model(other, (dir / "other.gguf").string());
    write(dir / "broken.gguf", "junk");
  }
};

const CatalogEntry* find(const std::vector<CatalogEntry>& models, const std::string& ref) {
  const auto it = std::find_if(models.begin(), models.end(),
                               [&](const CatalogEntry& e) { return e.ref == ref; });
  return it == models.end() ? nullptr : &*it;
}

TEST(ModelCatalog, FindsEveryStoresModelsAndTheirDraftPairs) {
  const Machine m;
  const std::vector<CatalogEntry> models = find_models(m.stores, {m.dir.string()});
  ASSERT_EQ(models.size(), 6u);  // big (two tags), gone, small, twice, other, broken
  const CatalogEntry* big = find(models, "ollama:big:7b");
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->aliases, std::vector<std::string>{"ollama:big:latest"});
  EXPECT_EQ(big->source, "ollama");
  EXPECT_EQ(big->arch, "llama");
  EXPECT_EQ(big->n_vocab, 300);
  EXPECT_GT(big->bytes, 0);
  EXPECT_TRUE(big->error.empty()) << big->error;
  const CatalogEntry* small = find(models, "hf:org/small-GGUF/small-q8_0.gguf");
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->source, "huggingface");
  EXPECT_EQ(small->vocab_hash, big->vocab_hash);
  EXPECT_EQ(find(models, "hf:org/small-GGUF/old-only.gguf"), nullptr);  // not refs/main's
  const CatalogEntry* twice = find(models, "hf:org/twice/m.gguf");
  ASSERT_NE(twice, nullptr);
  EXPECT_NE(twice->error.find("no refs/main"), std::string::npos) << twice->error;
  const CatalogEntry* other = find(models, (m.dir / "other.gguf").string());
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other->vocab_hash, big->vocab_hash);
  const CatalogEntry* gone = find(models, "ollama:gone:latest");
  ASSERT_NE(gone, nullptr);
  EXPECT_NE(gone->error.find("are missing"), std::string::npos) << gone->error;
  const CatalogEntry* broken = find(models, (m.dir / "broken.gguf").string());
  ASSERT_NE(broken, nullptr);
  EXPECT_NE(broken->error.find("not a GGUF file"), std::string::npos) << broken->error;

  const std::vector<DraftPair> pairs = draft_pairs(models);
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(&models[pairs[0].target], big);
  EXPECT_EQ(&models[pairs[0].draft], small);
  EXPECT_GT(pairs[0].size_ratio, 0.0);
  EXPECT_LT(pairs[0].size_ratio, 0.1);
  // A draft must be small enough to pay.
  EXPECT_TRUE(draft_pairs(models, pairs[0].size_ratio / 2).empty());
  // Every listed reference loads.
  EXPECT_EQ(resolve_model_ref(small->ref, m.stores), small->file);
}

}  // namespace
}  // namespace specdec
