#include "tokenizer/infill_prompt.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include "common/error.h"

namespace specdec {

namespace {

std::vector<int32_t> as_text(const Tokenizer& tok, std::string_view text) {
  return tok.encode(text, /*add_special=*/false, /*parse_special=*/false);
}

void append(std::vector<int32_t>& to, const std::vector<int32_t>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

}  // namespace

InfillPrompt encode_infill_prompt(const Tokenizer& tok, const InfillInput& input,
                                  size_t max_tokens) {
  const std::optional<Tokenizer::FimTokens> fim = tok.fim();
  if (!fim) fail("this model has no fill-in-the-middle tokens (a code model's <|fim_prefix|>...)");
  const bool repo_level = fim->repo >= 0 && fim->file_sep >= 0;

  const std::vector<int32_t> prefix = as_text(tok, input.prefix);
  const std::vector<int32_t> suffix = as_text(tok, input.suffix);
  const std::vector<int32_t> prompt = as_text(tok, input.prompt);
  // The extra context: a header (the repository line), one block per chunk, and the current
  // file's separator line.
  std::vector<int32_t> header, current_file;
  if (repo_level) {
    header.push_back(fim->repo);
    append(header, as_text(tok, "myproject\n"));
    current_file.push_back(fim->file_sep);
    append(current_file, as_text(tok, "filename\n"));
  }
  std::vector<std::vector<int32_t>> chunks;
  for (const InfillChunk& c : input.extra) {
    std::vector<int32_t> block;
    if (repo_level) {
      block.push_back(fim->file_sep);
      append(block, as_text(tok, c.filename + "\n"));
    } else {
      append(block, as_text(tok, "\n\n--- snippet ---\n\n"));
    }
    append(block, as_text(tok, c.text));
    chunks.push_back(std::move(block));
  }

  const bool bos = tok.add_bos() && tok.bos() >= 0;
  const size_t fixed = (bos ? 1 : 0) + 3 + prompt.size() + current_file.size();
  if (fixed > max_tokens) {
    fail("the infill prompt needs ", fixed, " tokens for its markers and 'prompt' alone, but ",
         max_tokens, " fit in the context beside the tokens to generate");
  }
  const size_t room = max_tokens - fixed;
  // The suffix first keeps up to a quarter (more where the prefix is short), the prefix then
  // takes what it can, and the suffix whatever the prefix left.
  size_t suffix_take =
      std::min({suffix.size(), room, std::max(room / 4, room - std::min(room, prefix.size()))});
  const size_t prefix_take = std::min(prefix.size(), room - suffix_take);
  suffix_take = std::min(suffix.size(), room - prefix_take);
  size_t left = room - prefix_take - suffix_take;

  InfillPrompt out;
  out.prefix_cut = static_cast<int32_t>(prefix.size() - prefix_take);
  out.suffix_cut = static_cast<int32_t>(suffix.size() - suffix_take);
  // Extra context: the header if it fits, then the latest chunks that fit, whole, in order.
  const bool with_header = header.size() <= left;
  if (with_header) left -= header.size();
  size_t first_kept = chunks.size();
  while (first_kept > 0 && chunks[first_kept - 1].size() <= left) {
    left -= chunks[first_kept - 1].size();
    --first_kept;
  }
  out.chunks_cut = static_cast<int32_t>(first_kept);

  std::vector<int32_t>& t = out.tokens;
  if (with_header) append(t, header);
  for (size_t i = first_kept; i < chunks.size(); ++i) append(t, chunks[i]);
  append(t, current_file);
  if (bos) t.push_back(tok.bos());
  t.push_back(fim->prefix);
  t.insert(t.end(), prefix.end() - static_cast<std::ptrdiff_t>(prefix_take), prefix.end());
  append(t, prompt);
  t.push_back(fim->suffix);
  t.insert(t.end(), suffix.begin(), suffix.begin() + static_cast<std::ptrdiff_t>(suffix_take));
  t.push_back(fim->middle);
  return out;
}

}  // namespace specdec
