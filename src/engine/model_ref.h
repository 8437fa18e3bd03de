// Model references: a GGUF given by where another tool already keeps it, so that a user who
// pulled a model with Ollama or downloaded one with Hugging Face's tools runs it without
// copying or finding the file. Resolved on this machine only (nothing is downloaded):
//
//   ollama:NAME[:TAG]             a model Ollama pulled (`ollama pull NAME:TAG`): its manifest
//                                 under manifests/<host>/<namespace>/<name>/<tag> names the
//                                 GGUF blob (the layer of type application/vnd.ollama.image.model)
//                                 in blobs/. NAME may be `model`, `user/model` or
//                                 `host/namespace/model` (registry.ollama.ai/library by default);
//                                 TAG defaults to `latest`. Stores searched: $OLLAMA_MODELS, else
//                                 ~/.ollama/models and /usr/share/ollama/.ollama/models (the
//                                 Linux service's). Only the weights are used: the file's own
//                                 chat template applies, not Ollama's Go template, system prompt
//                                 or parameters. A model with a LoRA adapter layer is refused
//                                 (specdec does not apply adapters).
//   hf:ORG/REPO[:QUANT]           a GGUF in the Hugging Face hub cache ($HF_HUB_CACHE, else
//   hf:ORG/REPO/PATH.gguf         $HF_HOME/hub, else ~/.cache/huggingface/hub), from the snapshot
//                                 refs/main names: the one .gguf file there, the one whose name
//                                 holds QUANT (case-insensitive, as llama.cpp's -hf picks), or
//                                 PATH; with several and no QUANT, the Q4_K_M one if there is one.
//
// Anything else is a file path, taken as it is.
#pragma once

#include <string>
#include <vector>

namespace specdec {

// Where references are looked up (model_stores() gives the defaults from the environment).
struct ModelStores {
  std::vector<std::string> ollama;  // roots holding manifests/ and blobs/
  std::vector<std::string> hf;      // hub caches holding models--ORG--REPO/
};

ModelStores model_stores();

// What a reference (or path) means: its GGUF file, and the LoRA adapters (GGUF files, applied
// at scale 1 as Ollama applies them) an Ollama model's manifest layers on it. Throws
// specdec::Error saying what was looked for and where when a reference does not resolve, or
// names a model specdec cannot run as it is.
struct ResolvedModel {
  std::string path;
  std::vector<std::string> adapters;
};
ResolvedModel resolve_model(const std::string& ref, const ModelStores& stores);
inline ResolvedModel resolve_model(const std::string& ref) {
  return resolve_model(ref, model_stores());
}
// resolve_model's GGUF file alone.
std::string resolve_model_ref(const std::string& ref, const ModelStores& stores);
inline std::string resolve_model_ref(const std::string& ref) {
  return resolve_model_ref(ref, model_stores());
}

// The name a reference gives its model: Ollama's `name:tag` (tag `latest` when none was given),
// the Hugging Face file's name without `.gguf`, or a path's file name without `.gguf`.
std::string model_ref_name(const std::string& ref);

// Whether `ref` is an ollama: or hf: reference rather than a path.
bool is_model_ref(const std::string& ref);

// In a hub cache's models--ORG--REPO directory: the snapshot directory refs/main names, or ""
// when refs/main is absent or names no snapshot there.
std::string hf_main_snapshot(const std::string& repo_dir);

}  // namespace specdec
