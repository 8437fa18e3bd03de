#include "engine/model_catalog.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "common/error.h"
#include "gguf/file_type.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace specdec {

namespace {

namespace fs = std::filesystem;

bool is_gguf(const fs::path& p) {
  std::string name = p.filename().string();
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name.ends_with(".gguf") && !name.starts_with("mmproj");  // projectors are no LMs
}

// FNV-1a, fed field by field with a separator that no token text holds alone.
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void add(std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= 0xff;
    h *= 1099511628211ull;
  }
  void add(int64_t v) { add(std::to_string(v)); }
};

// Reads what the catalog shows from a resolved file; the error, if any, goes in the entry.
void describe(CatalogEntry& e) {
  try {
    const std::unique_ptr<gguf::GgufFile> f = gguf::GgufFile::open(e.file);
    e.bytes = static_cast<int64_t>(f->file_size());
    e.name = f->get_string_or("general.name", "");
    e.arch = f->get_string_or("general.architecture", "?");
    e.quantization = gguf::file_type_name(f->get_int_or("general.file_type", -1));
    for (const auto& t : f->tensors()) e.parameters += t.n_elements();
    const Tokenizer tok = Tokenizer::from_gguf(*f);
    e.n_vocab = tok.n_vocab();
    Fnv fnv;
    fnv.add(static_cast<int64_t>(tok.kind() == VocabKind::Bpe ? 0 : 1));
    fnv.add(tok.n_vocab());
    fnv.add(tok.bos());
    fnv.add(tok.eos());
    for (int32_t id = 0; id < tok.n_vocab(); ++id) fnv.add(tok.token_text(id));
    e.vocab_hash = fnv.h;
  } catch (const Error& err) {
    e.error = err.what();
  }
}

void scan_ollama(const std::string& root, std::vector<CatalogEntry>& out) {
  const fs::path manifests = fs::path(root) / "manifests";
  std::error_code ec;
  if (!fs::is_directory(manifests, ec)) return;
  // manifests/<host>/<namespace>/<model>/<tag>: the tag files are four levels down.
  std::vector<fs::path> tags;
  for (auto it = fs::recursive_directory_iterator(manifests, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() == 3 && it->is_regular_file()) tags.push_back(it->path());
    if (it.depth() >= 3) it.disable_recursion_pending();
  }
  std::sort(tags.begin(), tags.end());  // an order that does not depend on the file system
  for (const fs::path& tag : tags) {
    const fs::path rel = fs::relative(tag, manifests);
    const std::vector<std::string> p(rel.begin(), rel.end());
    std::string name = p[2];
    if (p[0] != "registry.ollama.ai") {
      name = p[0] + "/" + p[1] + "/" + name;
    } else if (p[1] != "library") {
      name = p[1] + "/" + name;
    }
    CatalogEntry e;
    e.source = "ollama";
    e.ref = "ollama:" + name + ":" + p[3];
    try {
      e.file = resolve_model_ref(e.ref, ModelStores{{root}, {}});
    } catch (const Error& err) {
      e.error = err.what();
    }
    out.push_back(std::move(e));
  }
}

void scan_hf(const std::string& root, std::vector<CatalogEntry>& out) {
  std::error_code ec;
  for (const auto& repo : fs::directory_iterator(root, ec)) {
    const std::string dir = repo.path().filename().string();
    if (!dir.starts_with("models--") || !repo.is_directory()) continue;
    const std::string rest = dir.substr(8);
    const size_t sep = rest.find("--");
    if (sep == std::string::npos) continue;
    const std::string base = "hf:" + rest.substr(0, sep) + "/" + rest.substr(sep + 2);
    // The files of every snapshot, kept where they resolve: those of the snapshot refs/main
    // names (model_ref.h).
    std::error_code ec2;
    std::vector<std::string> files;
    for (const auto& snap : fs::directory_iterator(repo.path() / "snapshots", ec2)) {
      std::error_code ec3;
      for (auto it = fs::recursive_directory_iterator(snap.path(), ec3);
           !ec3 && it != fs::recursive_directory_iterator(); it.increment(ec3)) {
        if (is_gguf(it->path())) files.push_back(fs::relative(it->path(), snap.path()).string());
      }
    }
    std::sort(files.begin(), files.end());
    files.erase(std::unique(files.begin(), files.end()), files.end());
    for (const std::string& f : files) {
      CatalogEntry e;
      e.source = "huggingface";
      e.ref = base + "/" + f;
      try {
        e.file = resolve_model_ref(e.ref, ModelStores{{}, {root}});
      } catch (const Error& err) {
        const std::string main = hf_main_snapshot(repo.path().string());
        if (!main.empty() && !fs::is_regular_file(fs::path(main) / f)) {
          continue;  // in another snapshot than the one refs/main names
        }
        e.error = err.what();
      }
      out.push_back(std::move(e));
    }
  }
}

void scan_dir(const std::string& dir, std::vector<CatalogEntry>& out) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() >= 1) it.disable_recursion_pending();
    if (is_gguf(it->path()) && it->is_regular_file()) files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    CatalogEntry e;
    e.source = "directory";
    e.ref = e.file = f.string();
    out.push_back(std::move(e));
  }
}

}  // namespace

std::vector<CatalogEntry> find_models(const ModelStores& stores,
                                      const std::vector<std::string>& dirs) {
  std::vector<CatalogEntry> found;
  // A store that cannot be listed (permissions, a file vanishing mid-scan) lists what it could.
  const auto scan = [&found](const auto& fn, const std::string& where) {
    try {
      fn(where, found);
    } catch (const fs::filesystem_error&) {
    }
  };
  for (const std::string& root : stores.ollama) scan(scan_ollama, root);
  for (const std::string& root : stores.hf) scan(scan_hf, root);
  for (const std::string& dir : dirs) scan(scan_dir, dir);
  // One entry per file: Ollama's tags of one blob (and a directory symlinked into a store) are
  // aliases of the first reference found.
  std::vector<CatalogEntry> out;
  std::map<std::string, size_t> by_file;
  for (CatalogEntry& e : found) {
    std::error_code ec;
    const std::string key = e.file.empty() ? "" : fs::weakly_canonical(e.file, ec).string();
    if (!key.empty()) {
      const auto [it, fresh] = by_file.emplace(key, out.size());
      if (!fresh) {
        out[it->second].aliases.push_back(e.ref);
        continue;
      }
    }
    if (e.error.empty()) describe(e);
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<DraftPair> draft_pairs(const std::vector<CatalogEntry>& entries, double max_ratio) {
  std::vector<DraftPair> pairs;
  for (size_t t = 0; t < entries.size(); ++t) {
    const CatalogEntry& target = entries[t];
    if (!target.error.empty() || target.parameters <= 0) continue;
    std::vector<DraftPair> mine;
    for (size_t d = 0; d < entries.size(); ++d) {
      const CatalogEntry& draft = entries[d];
      if (d == t || !draft.error.empty() || draft.vocab_hash != target.vocab_hash) continue;
      const double ratio =
          static_cast<double>(draft.parameters) / static_cast<double>(target.parameters);
      if (ratio <= max_ratio) mine.push_back({t, d, ratio});
    }
    std::stable_sort(mine.begin(), mine.end(), [](const DraftPair& a, const DraftPair& b) {
      return a.size_ratio < b.size_ratio;
    });
    pairs.insert(pairs.end(), mine.begin(), mine.end());
  }
  return pairs;
}

}  // namespace specdec
