// The prompt of a code-infill request (llama-server's /infill, which editor plugins such as
// llama.vscode and llama.vim call): the code before and after the cursor, the start of the
// cursor's line, and extra context from other files, in the layout the model was trained on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace specdec {

// A piece of another file (or another part of this one) shown to the model before the code.
struct InfillChunk {
  std::string filename;  // "tmp" when the client names none, as llama-server does
  std::string text;
};

struct InfillInput {
  std::string prefix;  // the code before the gap (llama-server's input_prefix)
  std::string suffix;  // the code after it (input_suffix)
  // Text that directly precedes the gap (llama-server's `prompt`; llama.vscode sends the cursor's
  // line up to the cursor). It is never cut.
  std::string prompt;
  std::vector<InfillChunk> extra;  // oldest first (input_extra)
};

struct InfillPrompt {
  std::vector<int32_t> tokens;
  // What was cut to fit the budget: tokens from the front of the prefix and from the end of the
  // suffix, and whole extra chunks from the front of the list.
  int32_t prefix_cut = 0, suffix_cut = 0, chunks_cut = 0;
};

// llama-server's layout, so that the same request gives the same completion as there. With the
// repository-level markers (Qwen2.5-Coder's; the Qwen2.5-Coder report's repository format):
//
//   <REPO>myproject\n <SEP>{filename}\n{text} ... <SEP>filename\n
//   <PRE>{prefix}{prompt}<SUF>{suffix}<MID>
//
// (the repository and current file names are llama-server's fixed placeholders). Without them,
// each chunk's text follows a "\n\n--- snippet ---\n\n" line. The pieces are tokenized apart
// (the code as text: special-token spellings in it are not parsed), a BOS first where the
// vocabulary wants one (after the extra context, as llama-server puts it).
//
// At most `max_tokens` tokens: the markers and `prompt` always stay; then the suffix keeps up to
// a quarter of the budget (more where the prefix leaves room), the prefix its last tokens in
// what is left, the suffix its first tokens in what the prefix left over, and the extra chunks,
// latest first, whole, in the rest. Throws specdec::Error without FIM markers, or when the
// markers and `prompt` alone exceed the budget.
InfillPrompt encode_infill_prompt(const Tokenizer& tok, const InfillInput& input,
                                  size_t max_tokens);

}  // namespace specdec
