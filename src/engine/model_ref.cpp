#include "engine/model_ref.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"

namespace specdec {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kOllamaPrefix = "ollama:";
constexpr std::string_view kHfPrefix = "hf:";
constexpr const char* kOllamaModelLayer = "application/vnd.ollama.image.model";
constexpr const char* kOllamaAdapterLayer = "application/vnd.ollama.image.adapter";
// A manifest is a few hundred bytes; anything far larger is not one.
constexpr std::uintmax_t kMaxManifestBytes = 1 << 20;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string home() { return env_or("HOME", ""); }

// A name component as both tools write them: no separators, no "." or "..", so that a
// reference can never reach outside the store it is looked up in.
bool safe_component(std::string_view s) {
  if (s.empty() || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.emplace_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string joined(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i > 0 ? sep : "") + items[i];
  return out;
}

// ---- Ollama

struct OllamaName {
  std::string host = "registry.ollama.ai", ns = "library", model, tag = "latest";
  std::string display() const {
    const std::string base = host == "registry.ollama.ai" && ns == "library" ? model
                             : host == "registry.ollama.ai"                  ? ns + "/" + model
                                                            : host + "/" + ns + "/" + model;
    return base + ":" + tag;
  }
};

OllamaName parse_ollama_name(const std::string& ref) {
  const std::string_view spec = std::string_view(ref).substr(kOllamaPrefix.size());
  OllamaName n;
  std::string_view path = spec;
  // The tag follows the last ':' after the last '/' (a host may carry a port: host:port/ns/m).
  const size_t slash = spec.rfind('/');
  const size_t colon = spec.rfind(':');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    n.tag = std::string(spec.substr(colon + 1));
    path = spec.substr(0, colon);
  }
  const std::vector<std::string> parts = split(path, '/');
  if (parts.size() == 1) {
    n.model = parts[0];
  } else if (parts.size() == 2) {
    n.ns = parts[0];
    n.model = parts[1];
  } else if (parts.size() == 3) {
    n.host = parts[0];
    n.ns = parts[1];
    n.model = parts[2];
  } else {
    fail("'", ref, "': an Ollama model is named MODEL, USER/MODEL or HOST/NAMESPACE/MODEL, ",
         "with an optional :TAG");
  }
  // A host may name a port ("localhost:5000"): Ollama stores it with the colon.
  const auto host_ok = [](const std::string& h) {
    const size_t c = h.find(':');
    return c == std::string::npos
               ? safe_component(h)
               : safe_component(h.substr(0, c)) && safe_component(h.substr(c + 1));
  };
  if (!host_ok(n.host) || !safe_component(n.ns) || !safe_component(n.model) ||
      !safe_component(n.tag)) {
    fail("'", ref, "' is not an Ollama model name (letters, digits, '.', '_' and '-' in each ",
         "part)");
  }
  return n;
}

nlohmann::json read_manifest(const fs::path& path) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec || size > kMaxManifestBytes) fail(path.string(), ": not an Ollama manifest (too large)");
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("layers") || !j["layers"].is_array()) {
    fail(path.string(), ": not an Ollama manifest (no layers)");
  }
  return j;
}

ResolvedModel resolve_ollama(const std::string& ref, const ModelStores& stores) {
  const OllamaName n = parse_ollama_name(ref);
  std::vector<std::string> searched;
  for (const std::string& root : stores.ollama) {
    const fs::path manifest = fs::path(root) / "manifests" / n.host / n.ns / n.model / n.tag;
    std::error_code ec;
    if (!fs::is_regular_file(manifest, ec)) {
      searched.push_back(root);
      continue;
    }
    const nlohmann::json m = read_manifest(manifest);
    std::string digest;
    std::vector<std::string> adapter_digests;
    for (const nlohmann::json& layer : m["layers"]) {
      if (!layer.is_object() || !layer.contains("mediaType") || !layer["mediaType"].is_string()) {
        continue;
      }
      const std::string type = layer["mediaType"].get<std::string>();
      const bool has_digest = layer.contains("digest") && layer["digest"].is_string();
      if (type == kOllamaAdapterLayer) {
        // A Modelfile's ADAPTER: a GGUF LoRA adapter that Ollama applies at scale 1.
        if (!has_digest) fail(manifest.string(), ": an adapter layer without a digest");
        adapter_digests.push_back(layer["digest"].get<std::string>());
      }
      if (type == kOllamaModelLayer && has_digest) {
        if (!digest.empty()) fail("Ollama model ", n.display(), " has more than one model layer");
        digest = layer["digest"].get<std::string>();
      }
    }
    if (digest.empty()) {
      fail("Ollama model ", n.display(), " (", manifest.string(), ") has no GGUF model layer (",
           kOllamaModelLayer, "); models Ollama imported from safetensors cannot be read");
    }
    // "sha256:<64 hex>" is stored as blobs/sha256-<64 hex>.
    const auto blob_of = [&](const std::string& d, const char* what) {
      const bool hex = d.size() == 7 + 64 && d.starts_with("sha256:") &&
                       std::all_of(d.begin() + 7, d.end(), [](char c) {
                         return std::isxdigit(static_cast<unsigned char>(c)) != 0;
                       });
      if (!hex) fail(manifest.string(), ": the ", what, " layer's digest '", d, "' is not sha256");
      const fs::path blob = fs::path(root) / "blobs" / ("sha256-" + d.substr(7));
      if (!fs::is_regular_file(blob, ec)) {
        fail("Ollama model ", n.display(), ": its ", what, " ", blob.string(),
             std::string_view(what) == "weights" ? " are" : " is",
             " missing (an interrupted pull? `ollama pull ", n.display(), "` again)");
      }
      return blob.string();
    };
    ResolvedModel resolved{blob_of(digest, "weights"), {}};
    for (const std::string& d : adapter_digests) {
      resolved.adapters.push_back(blob_of(d, "adapter"));
    }
    return resolved;
  }
  fail("no Ollama model ", n.display(), " in ",
       searched.empty() ? std::string("any store (none configured)") : joined(searched),
       " (set OLLAMA_MODELS to Ollama's models directory, or `ollama pull ", n.display(),
       "` first)");
}

// ---- Hugging Face

struct HfName {
  std::string org, repo, quant, file;
};

HfName parse_hf_name(const std::string& ref) {
  const std::string_view spec = std::string_view(ref).substr(kHfPrefix.size());
  const std::vector<std::string> parts = split(spec, '/');
  HfName n;
  if (parts.size() < 2) fail("'", ref, "': write hf:ORG/REPO[:QUANT] or hf:ORG/REPO/FILE.gguf");
  n.org = parts[0];
  n.repo = parts[1];
  if (parts.size() == 2) {
    if (const size_t c = n.repo.find(':'); c != std::string::npos) {
      n.quant = n.repo.substr(c + 1);
      n.repo.resize(c);
      if (n.quant.empty() || !safe_component(n.quant)) fail("'", ref, "': a bad quantization tag");
    }
  } else {
    for (size_t i = 2; i < parts.size(); ++i) {
      if (!safe_component(parts[i])) fail("'", ref, "': a bad file path in the repository");
      n.file += (i > 2 ? "/" : "") + parts[i];
    }
  }
  if (!safe_component(n.org) || !safe_component(n.repo)) {
    fail("'", ref, "' is not a Hugging Face repository name");
  }
  return n;
}

// The snapshot refs/main names, or the only snapshot there is.
fs::path hf_snapshot(const fs::path& repo_dir, const std::string& ref) {
  if (std::string main = hf_main_snapshot(repo_dir.string()); !main.empty()) return main;
  std::error_code ec;
  std::vector<fs::path> snapshots;
  for (const auto& e : fs::directory_iterator(repo_dir / "snapshots", ec)) {
    if (e.is_directory()) snapshots.push_back(e.path());
  }
  if (snapshots.size() == 1) return snapshots[0];
  fail("'", ref, "': ", repo_dir.string(), " has ", snapshots.size(),
       " snapshots and no refs/main to choose one");
}

std::string resolve_hf(const std::string& ref, const ModelStores& stores) {
  const HfName n = parse_hf_name(ref);
  std::vector<std::string> searched;
  for (const std::string& root : stores.hf) {
    const fs::path repo_dir = fs::path(root) / ("models--" + n.org + "--" + n.repo);
    std::error_code ec;
    if (!fs::is_directory(repo_dir, ec)) {
      searched.push_back(root);
      continue;
    }
    const fs::path snapshot = hf_snapshot(repo_dir, ref);
    if (!n.file.empty()) {
      const fs::path file = snapshot / n.file;
      if (!fs::is_regular_file(file, ec)) fail("'", ref, "': ", file.string(), " is not there");
      return file.string();
    }
    std::vector<std::string> ggufs;  // relative to the snapshot
    for (auto it = fs::recursive_directory_iterator(snapshot, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      const std::string name = it->path().filename().string();
      // Vision projectors are not language models.
      if (lower(name).ends_with(".gguf") && !lower(name).starts_with("mmproj") &&
          it->is_regular_file()) {
        ggufs.push_back(fs::relative(it->path(), snapshot).string());
      }
    }
    std::sort(ggufs.begin(), ggufs.end());
    std::vector<std::string> picked;
    const std::string want = lower(n.quant.empty() ? "q4_k_m" : n.quant);
    for (const std::string& g : ggufs) {
      if (lower(fs::path(g).filename().string()).find(want) != std::string::npos) {
        picked.push_back(g);
      }
    }
    if (n.quant.empty() && ggufs.size() == 1) picked = ggufs;
    if (picked.size() == 1) {
      if (picked[0].find("-of-") != std::string::npos) {
        fail("'", ref, "': ", picked[0], " is one part of a split GGUF, which specdec cannot ",
             "read; merge it first (llama-gguf-split --merge)");
      }
      return (snapshot / picked[0]).string();
    }
    if (ggufs.empty()) fail("'", ref, "': no .gguf file in ", snapshot.string());
    fail("'", ref, "': ", picked.empty() ? "no" : "more than one", " .gguf file ",
         n.quant.empty() ? std::string("(and none is Q4_K_M)")
                         : "with '" + n.quant + "' in its name",
         " among: ", joined(ggufs), "; name one with :QUANT or /FILE.gguf");
  }
  fail("no Hugging Face repository ", n.org, "/", n.repo, " in ",
       searched.empty() ? std::string("any hub cache (none configured)") : joined(searched),
       " (set HF_HUB_CACHE or HF_HOME, or download it there with the Hugging Face tools)");
}

}  // namespace

ModelStores model_stores() {
  ModelStores s;
  const std::string h = home();
  if (const char* v = std::getenv("OLLAMA_MODELS"); v != nullptr && *v != '\0') {
    s.ollama.push_back(v);
  } else {
    if (!h.empty()) s.ollama.push_back(h + "/.ollama/models");
    s.ollama.push_back("/usr/share/ollama/.ollama/models");
  }
  if (const char* v = std::getenv("HF_HUB_CACHE"); v != nullptr && *v != '\0') {
    s.hf.push_back(v);
  } else if (const char* hf = std::getenv("HF_HOME"); hf != nullptr && *hf != '\0') {
    s.hf.push_back(std::string(hf) + "/hub");
  } else if (!h.empty()) {
    s.hf.push_back(env_or("XDG_CACHE_HOME", h + "/.cache") + "/huggingface/hub");
  }
  return s;
}

bool is_model_ref(const std::string& ref) {
  return ref.starts_with(kOllamaPrefix) || ref.starts_with(kHfPrefix);
}

std::string hf_main_snapshot(const std::string& repo_dir) {
  std::ifstream main_ref(fs::path(repo_dir) / "refs" / "main");
  std::string revision;
  std::error_code ec;
  if (main_ref && std::getline(main_ref, revision) && safe_component(revision) &&
      fs::is_directory(fs::path(repo_dir) / "snapshots" / revision, ec)) {
    return (fs::path(repo_dir) / "snapshots" / revision).string();
  }
  return "";
}

ResolvedModel resolve_model(const std::string& ref, const ModelStores& stores) {
  if (ref.starts_with(kOllamaPrefix)) return resolve_ollama(ref, stores);
  if (ref.starts_with(kHfPrefix)) return {resolve_hf(ref, stores), {}};
  return {ref, {}};
}

std::string resolve_model_ref(const std::string& ref, const ModelStores& stores) {
  return resolve_model(ref, stores).path;
}

std::string model_ref_name(const std::string& ref) {
  if (ref.starts_with(kOllamaPrefix)) return parse_ollama_name(ref).display();
  std::string name = fs::path(ref).filename().string();
  if (ref.starts_with(kHfPrefix)) {
    const HfName n = parse_hf_name(ref);
    name = n.file.empty() ? n.repo + (n.quant.empty() ? "" : "-" + n.quant)
                          : fs::path(n.file).filename().string();
  }
  if (name.size() > 5 && lower(name).ends_with(".gguf")) name.resize(name.size() - 5);
  return name;
}

}  // namespace specdec
