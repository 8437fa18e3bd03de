// Chat template fuzz target. Input: one flag byte, then NUL-separated fields: the template
// source, the BOS text, the EOS text, then role and content alternately (up to 64 messages).
//   bits 0-2  0-5: ChatTemplate::of(ChatML, Llama3, Llama2, Gemma, Zephyr, Phi3);
//             6-7: ChatTemplate::detect(template source), as the engine does with
//             tokenizer.chat_template (the template is recognised, not run as Jinja)
//   bit 3     add_generation_prompt
//   bit 4     set_special_texts(BOS text, EOS text), as from_gguf does with the vocab's own
//   bits 5-7  the vocabulary encode_prompt tokenizes with (fuzz_support.h)
// Checks: rendering is deterministic; every message's content (trimmed where the template trims
// it) appears in the prompt in order; a ChatML default system prompt comes first when the
// conversation has none; encode_prompt's ids are in the vocabulary and, for byte-level BPE and
// valid UTF-8, spell the rendered prompt back.
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "fuzz_targets.h"
#include "tokenizer/chat_template.h"

namespace specdec::fuzz {
namespace {

constexpr size_t kMaxMessages = 64;

std::string trim(std::string_view s) {
  constexpr std::string_view kWs = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(kWs);
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(kWs) - b + 1));
}

}  // namespace

int fuzz_one_chat_template(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const uint8_t flags = in.byte();
  const std::string_view source = in.field();
  const std::string_view bos = in.field();
  const std::string_view eos = in.field();
  std::vector<ChatMessage> msgs;
  while (!in.empty() && msgs.size() < kMaxMessages) {
    ChatMessage m;
    m.role = in.field();
    m.content = in.field();
    msgs.push_back(std::move(m));
  }

  const int kind = flags & 7;
  ChatTemplate t =
      kind < 6 ? ChatTemplate::of(static_cast<ChatFormat>(kind)) : ChatTemplate::detect(source);
  if (flags & 16) t.set_special_texts(std::string(bos), std::string(eos));
  const bool gen = (flags & 8) != 0;

  const std::string rendered = t.apply(msgs, gen);
  FUZZ_CHECK(t.apply(msgs, gen) == rendered);
  FUZZ_CHECK(!t.name().empty());

  // Contents appear in order. Llama 2 folds the system prompt into the first user turn and
  // drops other roles, so only its first two checks below apply.
  const ChatFormat f = t.format();
  if (f != ChatFormat::Llama2) {
    const bool trims = f == ChatFormat::Llama3 || f == ChatFormat::Gemma;
    // Gemma renders a leading system message only inside the next turn.
    size_t first = f == ChatFormat::Gemma && !msgs.empty() && msgs[0].role == "system" ? 1 : 0;
    size_t at = 0;
    for (size_t i = first; i < msgs.size(); ++i) {
      const std::string want = trims ? trim(msgs[i].content) : msgs[i].content;
      const size_t pos = rendered.find(want, at);
      FUZZ_CHECK(pos != std::string::npos);
      at = pos + want.size();
    }
  }
  if ((f == ChatFormat::ChatML || f == ChatFormat::Unknown) && !t.default_system().empty() &&
      !msgs.empty() && msgs[0].role != "system") {
    FUZZ_CHECK(rendered.starts_with("<|im_start|>system\n" + t.default_system() + "<|im_end|>\n"));
  }

  const Tokenizer& tok = vocab_tokenizer(flags >> 5);
  const std::vector<int32_t> ids = encode_prompt(tok, rendered);
  for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < tok.n_vocab());
  if (tok.kind() == VocabKind::Bpe && is_valid_utf8(rendered)) {
    size_t begin = 0;
    if (tok.add_bos() && !rendered.starts_with(tok.token_text(tok.bos()))) {
      FUZZ_CHECK(!ids.empty() && ids[0] == tok.bos());
      begin = 1;
    }
    std::string spelled;
    for (size_t i = begin; i < ids.size(); ++i) {
      spelled += tok.token_type(ids[i]) == kTokenControl ? tok.token_text(ids[i])
                                                         : tok.token_bytes(ids[i]);
    }
    FUZZ_CHECK(spelled == rendered);
  }
  return 0;
}

}  // namespace specdec::fuzz
