#include "server/reasoning.h"

#include <algorithm>

namespace specdec::server {

namespace {

// The length of the longest suffix of `text` that is a proper prefix of `tag`: bytes that may
// still become the tag when more text comes.
size_t partial_tag(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

void drop_leading_newlines(std::string& s) {
  s.erase(0, std::min(s.find_first_not_of('\n'), s.size()));
}

}  // namespace

std::optional<ReasoningFormat> reasoning_format_named(std::string_view name) {
  if (name == "auto") return ReasoningFormat::Auto;
  if (name == "deepseek") return ReasoningFormat::Deepseek;
  if (name == "deepseek-legacy") return ReasoningFormat::DeepseekLegacy;
  if (name == "none") return ReasoningFormat::None;
  return std::nullopt;
}

ReasoningStream::ReasoningStream(bool opened) : state_(opened ? State::Reasoning : State::Start) {}

ReasoningSplit ReasoningStream::push(std::string_view text) {
  held_.append(text);
  return drain(/*end=*/false);
}

ReasoningSplit ReasoningStream::finish() { return drain(/*end=*/true); }

ReasoningSplit ReasoningStream::drain(bool end) {
  ReasoningSplit out;
  for (;;) {
    switch (state_) {
      case State::Start:
        if (held_.starts_with(kThinkOpen)) {
          held_.erase(0, kThinkOpen.size());
          state_ = State::Reasoning;
          continue;
        }
        // Not (yet) the tag: wait while it may still become it.
        if (!end && kThinkOpen.starts_with(held_)) return out;
        state_ = State::Content;
        continue;
      case State::Reasoning: {
        if (!reasoning_started_) drop_leading_newlines(held_);
        const size_t close = held_.find(kThinkClose);
        if (close != std::string::npos) {
          std::string_view r = std::string_view(held_).substr(0, close);
          while (!r.empty() && r.back() == '\n') r.remove_suffix(1);
          out.reasoning.append(r);
          held_.erase(0, close + kThinkClose.size());
          state_ = State::AfterClose;
          continue;
        }
        // Hold what may be the start of the closing tag and the newlines before it (they pad
        // the block when the tag follows).
        size_t keep = end ? 0 : partial_tag(held_, kThinkClose);
        if (!end) {
          while (keep < held_.size() && held_[held_.size() - keep - 1] == '\n') ++keep;
        }
        out.reasoning.append(held_, 0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        if (!out.reasoning.empty()) reasoning_started_ = true;
        return out;
      }
      case State::AfterClose:
        drop_leading_newlines(held_);
        if (held_.empty()) return out;
        state_ = State::Content;
        continue;
      case State::Content:
        out.content.append(held_);
        held_.clear();
        return out;
    }
  }
}

ReasoningSplit split_reasoning(std::string_view reply, bool opened) {
  ReasoningStream stream(opened);
  ReasoningSplit out = stream.push(reply);
  const ReasoningSplit rest = stream.finish();
  out.reasoning += rest.reasoning;
  out.content += rest.content;
  return out;
}

ReasoningSplit ReasoningMode::of(std::string_view reply) const {
  if (!split) return ReasoningSplit{"", std::string(reply)};
  ReasoningSplit s = split_reasoning(reply, opened);
  if (whole_content) s.content = std::string(reply);
  return s;
}

int64_t count_reasoning_tokens(const Tokenizer& tokenizer, std::span<const int32_t> tokens,
                               bool reasoning) {
  if (!reasoning) return 0;
  std::string text;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string piece = tokenizer.token_bytes(tokens[i]);
    // Only where this piece ends the tag can it first appear.
    const size_t from = text.size() > kThinkClose.size() ? text.size() - kThinkClose.size() : 0;
    text += piece;
    if (text.find(kThinkClose, from) != std::string::npos) return static_cast<int64_t>(i + 1);
  }
  return static_cast<int64_t>(tokens.size());
}

}  // namespace specdec::server
