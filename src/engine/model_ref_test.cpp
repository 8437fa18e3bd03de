#include "engine/model_ref.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "engine/loaded_model.h"
#include "support/tiny_model.h"

namespace specdec {
namespace {

namespace fs = std::filesystem;

const std::string kDigest(64, 'a');
const std::string kOther(64, 'b');
const std::string kAdapter(64, 'c');

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

std::string manifest(const std::string& layers) {
  return R"({"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",)"
         R"("config":{"mediaType":"application/vnd.docker.container.image.v1+json",)"
         R"("digest":"sha256:)" +
         kOther + R"(","size":10},"layers":[)" + layers + "]}";
}

std::string layer(const std::string& type, const std::string& digest) {
  return R"({"mediaType":")" + type + R"(","digest":"sha256:)" + digest + R"(","size":1})";
}

const std::string kModelLayer = "application/vnd.ollama.image.model";

// An Ollama store as `ollama pull` leaves it: manifests/<host>/<ns>/<model>/<tag> and blobs/.
struct OllamaStore {
  fs::path root = fs::path(testing::temp_path("ollama"));
  void add(const std::string& host, const std::string& ns, const std::string& model,
           const std::string& tag, const std::string& text) {
    write(root / "manifests" / host / ns / model / tag, text);
  }
  fs::path blob(const std::string& digest) const { return root / "blobs" / ("sha256-" + digest); }
};

std::string error_of(const std::string& ref, const ModelStores& stores) {
  try {
    resolve_model_ref(ref, stores);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << ref << " resolved";
  return "";
}

TEST(ModelRef, OllamaNamesFindTheirGgufBlob) {
  OllamaStore s;
  const std::string pulled = manifest(layer(kModelLayer, kDigest) + "," +
                                      layer("application/vnd.ollama.image.template", kOther) + "," +
                                      layer("application/vnd.ollama.image.params", kOther));
  s.add("registry.ollama.ai", "library", "qwen2.5-coder", "1.5b", pulled);
  s.add("registry.ollama.ai", "library", "qwen2.5-coder", "latest", pulled);
  s.add("registry.ollama.ai", "someone", "coder", "q8", pulled);
  s.add("example.com", "team", "coder", "latest", pulled);
  write(s.blob(kDigest), "GGUF");
  const ModelStores stores{{"/nonexistent/store", s.root.string()}, {}};
  const std::string blob = s.blob(kDigest).string();
  EXPECT_EQ(resolve_model_ref("ollama:qwen2.5-coder:1.5b", stores), blob);
  EXPECT_EQ(resolve_model_ref("ollama:qwen2.5-coder", stores), blob);  // :latest
  EXPECT_EQ(resolve_model_ref("ollama:someone/coder:q8", stores), blob);
  EXPECT_EQ(resolve_model_ref("ollama:example.com/team/coder", stores), blob);
  EXPECT_EQ(model_ref_name("ollama:qwen2.5-coder:1.5b"), "qwen2.5-coder:1.5b");
  EXPECT_EQ(model_ref_name("ollama:qwen2.5-coder"), "qwen2.5-coder:latest");
  EXPECT_EQ(model_ref_name("ollama:someone/coder:q8"), "someone/coder:q8");
  // A path is a path.
  EXPECT_EQ(resolve_model_ref("/models/x.gguf", stores), "/models/x.gguf");
  EXPECT_EQ(model_ref_name("/models/x.Q4_K_M.gguf"), "x.Q4_K_M");
  EXPECT_TRUE(is_model_ref("ollama:x") && is_model_ref("hf:a/b") && !is_model_ref("x.gguf"));
}

TEST(ModelRef, OllamaRefusalsSayWhatWasLookedForAndWhy) {
  OllamaStore s;
  const ModelStores stores{{s.root.string()}, {}};
  std::string e = error_of("ollama:missing:7b", stores);
  EXPECT_NE(e.find("no Ollama model missing:7b in " + s.root.string()), std::string::npos) << e;
  EXPECT_NE(e.find("ollama pull missing:7b"), std::string::npos) << e;

  // A Modelfile's ADAPTER layer is a LoRA adapter applied to the weights; its blob must be there.
  s.add("registry.ollama.ai", "library", "lora", "latest",
        manifest(layer(kModelLayer, kDigest) + "," +
                 layer("application/vnd.ollama.image.adapter", kAdapter)));
  write(s.blob(kDigest), "GGUF");
  EXPECT_NE(error_of("ollama:lora", stores)
                .find("its adapter " + s.blob(kAdapter).string() + " is missing"),
            std::string::npos)
      << error_of("ollama:lora", stores);
  write(s.blob(kAdapter), "GGUF");
  const ResolvedModel adapted = resolve_model("ollama:lora", stores);
  EXPECT_EQ(adapted.path, s.blob(kDigest).string());
  EXPECT_EQ(adapted.adapters, std::vector<std::string>{s.blob(kAdapter).string()});
  EXPECT_TRUE(resolve_model("/models/x.gguf", stores).adapters.empty());

  s.add("registry.ollama.ai", "library", "safetensors", "latest",
        manifest(layer("application/vnd.ollama.image.tensor; name=w", kDigest)));
  EXPECT_NE(error_of("ollama:safetensors", stores).find("no GGUF model layer"), std::string::npos);

  s.add("registry.ollama.ai", "library", "gone", "latest", manifest(layer(kModelLayer, kOther)));
  EXPECT_NE(error_of("ollama:gone", stores).find("are missing"), std::string::npos);

  s.add("registry.ollama.ai", "library", "broken", "latest", "{not json");
  EXPECT_NE(error_of("ollama:broken", stores).find("not an Ollama manifest"), std::string::npos);

  // A digest or a name that could lead outside the store is refused, not followed.
  s.add(
      "registry.ollama.ai", "library", "escape", "latest",
      manifest(R"({"mediaType":")" + kModelLayer + R"(","digest":"sha256:../../../etc/passwd"})"));
  EXPECT_NE(error_of("ollama:escape", stores).find("not sha256"), std::string::npos);
  for (const char* bad : {"ollama:../x", "ollama:a/../../b:c", "ollama:x:..",
                          "ollama:", "ollama:a/b/c/d", "ollama:x:la/test"}) {
    EXPECT_FALSE(error_of(bad, stores).empty()) << bad;
  }
}

// A hub cache as huggingface_hub leaves it: models--ORG--REPO/{refs/main, snapshots/REV/...}.
struct HfCache {
  fs::path root = fs::path(testing::temp_path("hf-hub"));
  fs::path snapshot(const std::string& repo, const std::string& rev) const {
    return root / repo / "snapshots" / rev;
  }
};

TEST(ModelRef, HuggingFaceReposFindTheGgufByQuantOrPath) {
  HfCache c;
  const std::string repo = "models--Qwen--Qwen2.5-Coder-1.5B-Instruct-GGUF";
  const fs::path snap = c.snapshot(repo, "abc123");
  write(c.root / repo / "refs" / "main", "abc123");
  write(c.snapshot(repo, "old999") / "qwen2.5-coder-1.5b-instruct-q8_0.gguf", "GGUF");
  for (const char* f : {"qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                        "qwen2.5-coder-1.5b-instruct-q8_0.gguf", "mmproj-f16.gguf", "README.md"}) {
    write(snap / f, "GGUF");
  }
  write(snap / "sub" / "q3_k_m.gguf", "GGUF");
  const ModelStores stores{{}, {c.root.string()}};
  const std::string ref = "hf:Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF";
  EXPECT_EQ(resolve_model_ref(ref + ":Q8_0", stores),
            (snap / "qwen2.5-coder-1.5b-instruct-q8_0.gguf").string());
  // Several and no quant: Q4_K_M, as llama.cpp's -hf picks.
  EXPECT_EQ(resolve_model_ref(ref, stores),
            (snap / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf").string());
  EXPECT_EQ(resolve_model_ref(ref + "/sub/q3_k_m.gguf", stores),
            (snap / "sub/q3_k_m.gguf").string());
  EXPECT_EQ(model_ref_name(ref + ":Q8_0"), "Qwen2.5-Coder-1.5B-Instruct-GGUF-Q8_0");
  EXPECT_EQ(model_ref_name(ref + "/sub/q3_k_m.gguf"), "q3_k_m");

  std::string e = error_of(ref + ":IQ2_XS", stores);
  EXPECT_NE(e.find("no .gguf file with 'IQ2_XS'"), std::string::npos) << e;
  EXPECT_NE(e.find("qwen2.5-coder-1.5b-instruct-q8_0.gguf"), std::string::npos) << e;
  EXPECT_EQ(e.find("mmproj"), std::string::npos) << e;  // a projector is not a candidate
  EXPECT_NE(error_of(ref + ":1.5b", stores).find("more than one"), std::string::npos);
  EXPECT_NE(error_of("hf:Other/Repo", stores).find("no Hugging Face repository Other/Repo"),
            std::string::npos);
  EXPECT_NE(error_of(ref + "/missing.gguf", stores).find("is not there"), std::string::npos);
  for (const char* bad : {"hf:Qwen", "hf:../x", "hf:a/b/../../c.gguf", "hf:a/b:"}) {
    EXPECT_FALSE(error_of(bad, stores).empty()) << bad;
  }
  // A split GGUF is named as such.
  write(c.snapshot("models--a--split", "r") / "m-q4_k_m-00001-of-00002.gguf", "GGUF");
  EXPECT_NE(error_of("hf:a/split", stores).find("split GGUF"), std::string::npos);
}

TEST(ModelRef, StoresComeFromTheEnvironment) {
  const char* keys[] = {"OLLAMA_MODELS", "HF_HUB_CACHE", "HF_HOME", "HOME", "XDG_CACHE_HOME"};
  std::vector<std::optional<std::string>> saved;
  for (const char* k : keys) {
    const char* v = std::getenv(k);
    saved.push_back(v ? std::optional<std::string>(v) : std::nullopt);
  }
  for (const char* k : keys) unsetenv(k);
  setenv("HOME", "/home/u", 1);
  ModelStores s = model_stores();
  EXPECT_EQ(s.ollama, (std::vector<std::string>{"/home/u/.ollama/models",
                                                "/usr/share/ollama/.ollama/models"}));
  EXPECT_EQ(s.hf, std::vector<std::string>{"/home/u/.cache/huggingface/hub"});
  setenv("HF_HOME", "/hf", 1);
  EXPECT_EQ(model_stores().hf, std::vector<std::string>{"/hf/hub"});
  setenv("HF_HUB_CACHE", "/hub", 1);
  setenv("OLLAMA_MODELS", "/srv/ollama", 1);
  s = model_stores();
  EXPECT_EQ(s.hf, std::vector<std::string>{"/hub"});
  EXPECT_EQ(s.ollama, std::vector<std::string>{"/srv/ollama"});
  for (size_t i = 0; i < std::size(keys); ++i) {
    if (saved[i]) {
      setenv(keys[i], saved[i]->c_str(), 1);
    } else {
      unsetenv(keys[i]);
    }
  }
}

TEST(ModelRef, LoadedModelLoadsAnOllamaModelAndHintsAtTheReference) {
  OllamaStore s;
  s.add("registry.ollama.ai", "library", "tiny", "latest", manifest(layer(kModelLayer, kDigest)));
  fs::create_directories(s.root / "blobs");
  testing::write_tiny_model({}, s.blob(kDigest).string());
  setenv("OLLAMA_MODELS", s.root.c_str(), 1);
  const LoadedModel m = LoadedModel::load("ollama:tiny");
  EXPECT_EQ(m.file->path(), s.blob(kDigest).string());
  unsetenv("OLLAMA_MODELS");
  try {
    LoadedModel::load("tiny:latest");
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("write ollama:tiny:latest"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace specdec
