// read_slot_file (engine/slot_file.h) on arbitrary bytes, as a server's POST
// /slots/{id}?action=restore or `run --prompt-cache` reads a file someone else may have written,
// into caches of each type (f32, f16, q8_0). A file it accepts must leave the caches holding
// exactly what it says (the tokens, inside the vocabulary; the draft's rows inside the text),
// and, written back from those caches, must give the same bytes: nothing accepted is read in a
// way the writer would not have written it.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "common/error.h"
#include "engine/slot_file.h"
#include "fuzz_support.h"
#include "fuzz_targets.h"

namespace specdec::fuzz {

int fuzz_one_slot_file(const uint8_t* data, size_t size) {
  static const MemFile mem("specdec_fuzz_slot_file");
  static const ModelConfig target_config = slot_fuzz_config(false);
  static const ModelConfig draft_config = slot_fuzz_config(true);
  mem.write(data, size);
  for (const KvTypes types :
       {KvTypes{}, KvTypes{KvType::F16, KvType::F16}, KvTypes{KvType::Q8_0, KvType::Q8_0}}) {
    KvCache target(target_config, kSlotFuzzContext, types);
    KvCache draft(draft_config, kSlotFuzzContext, types);
    const SlotCachePart t{&target, kSlotFuzzTargetFingerprint};
    const SlotCachePart d{&draft, kSlotFuzzDraftFingerprint};
    SlotFileRead read;
    try {
      read = read_slot_file(mem.path, t, kSlotFuzzVocab, d);
    } catch (const Error& e) {
      note_refused("read_slot_file", e);
      continue;
    }
    const auto n = static_cast<int32_t>(read.tokens.size());
    FUZZ_CHECK(n <= kSlotFuzzContext && target.length() == n);
    for (int32_t id : read.tokens) FUZZ_CHECK(id >= 0 && id < kSlotFuzzVocab);
    FUZZ_CHECK(draft.length() == read.draft_rows);
    FUZZ_CHECK(read.draft_rows >= 0 && read.draft_base >= 0 && read.draft_base <= n &&
               read.draft_rows <= n - read.draft_base);
    FUZZ_CHECK(read.bytes == size);
    FUZZ_CHECK(!read.lora_scales || read.lora_scales->size() <= kMaxSlotFileLoraScales);
    // Written back: the same bytes, when the file's draft rows were taken (a skipped draft
    // section, or an absent one, is written differently, by design) and it is a version 2 file
    // (a version 1 file is written back as version 2, with its LoRA scales).
    if (read.draft_rows == 0 || !read.lora_scales) continue;
    const std::string back = std::filesystem::temp_directory_path() /
                             ("specdec_fuzz_slot_" + std::to_string(::getpid()) + ".bin");
    write_slot_file(back, read.tokens, t, d, read.draft_rows, read.draft_base, *read.lora_scales);
    std::ifstream in(back, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                     std::istreambuf_iterator<char>());
    std::filesystem::remove(back);
    FUZZ_CHECK(bytes.size() == size && std::equal(bytes.begin(), bytes.end(), data));
  }
  return 0;
}

}  // namespace specdec::fuzz
