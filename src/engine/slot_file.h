// A slot's cached text on disk: its tokens with the target's (and the draft's) K/V entries for
// them, so that a long shared prompt read once can be restored later, in another process,
// instead of being read again (llama-server's POST /slots/N?action=save|restore, llama-cli's
// --prompt-cache). Restored entries are the bits the slot held, so what follows is exactly
// what it would have been had the slot read the text itself.
//
// Layout (little-endian; version 2):
//   "SPECSLOT" u32 version
//   u32 n_tokens, i32 tokens[n_tokens]
//   u32 n_lora, f32 lora_scales[n_lora]: the scale of each of the target's LoRA adapters its
//     rows were computed at (version 1 files, which lack it, are read too)
//   the target's section, then u8 has_draft and, if 1, u32 draft_base and the draft's section;
//     a section is u64 model fingerprint (gguf/gguf_fingerprint.h), u32 n_layer, n_head_kv,
//     head_dim, u8 K type, u8 V type (model/kv_cache.h's KvType), u32 rows, u64 bytes, the rows
//     (KvCache::save_rows). The target's rows are tokens[0, n_tokens); the draft's are
//     tokens[draft_base, draft_base + rows) (a draft reading a context window starts past 0).
//   u64 StreamHash of every byte before it
// The target's section must match the engine that reads it (fingerprint, which with adapters
// depends on their scales, shape, cache types);
// the draft's rows are only a speed-up, so a draft section for another draft model or other
// cache types is checked and skipped (the draft then reads the text again).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/kv_cache.h"

namespace specdec {

// More LoRA scales than any file names (llama.cpp loads a handful of adapters): a count past it
// is corruption.
inline constexpr uint32_t kMaxSlotFileLoraScales = 4096;

// One model's part of a slot: its cache and the fingerprint of the file it was loaded from.
struct SlotCachePart {
  KvCache* cache = nullptr;
  uint64_t fingerprint = 0;
};

struct SlotFileWritten {
  uint64_t bytes = 0;
};

// Writes tokens with the target cache's first tokens.size() entries and, when draft.cache is
// set, the draft cache's first n_draft, which hold tokens[draft_base, draft_base + n_draft), to
// `path`, through a temporary file renamed into place (a failed write leaves no partial file).
// Throws specdec::Error.
SlotFileWritten write_slot_file(const std::string& path, std::span<const int32_t> tokens,
                                const SlotCachePart& target, const SlotCachePart& draft,
                                int32_t n_draft, int32_t draft_base = 0,
                                std::span<const float> lora_scales = {});

struct SlotFileRead {
  std::vector<int32_t> tokens;
  int32_t draft_rows = 0;  // entries the draft cache now holds (0: none, or skipped)
  int32_t draft_base = 0;  // the token its first entry holds
  // The LoRA scales the target's rows were computed at; nullopt: a version 1 file, which does
  // not say.
  std::optional<std::vector<float>> lora_scales;
  uint64_t bytes = 0;
};

// The fingerprint the target's section must carry, given the LoRA scales the file says its rows
// were computed at (null: a version 1 file); it may throw specdec::Error to refuse them.
using SlotFingerprintAt = std::function<uint64_t(const std::vector<float>* lora_scales)>;

// Reads `path` into the target cache (and the draft's, see above), each then holding exactly
// the file's entries. Everything the file says about itself is checked first; before_rows (if
// set) is called once, just before the first entry is written into a cache. Throws
// specdec::Error naming the file and what is wrong with it (not a slot file, another version,
// another target model, a shape or cache type that differs, more tokens than the cache holds, a
// token id outside [0, n_vocab), truncated, checksum mismatch): if before_rows was called, the
// caches' contents are then undefined and the caller must empty them; if not, they are as they
// were. target_fingerprint (if set) replaces target.fingerprint as what the target's section
// must carry.
SlotFileRead read_slot_file(const std::string& path, const SlotCachePart& target, int32_t n_vocab,
                            const SlotCachePart& draft,
                            const std::function<void()>& before_rows = {},
                            const SlotFingerprintAt& target_fingerprint = {});

}  // namespace specdec
