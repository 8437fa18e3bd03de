#include "server/openai_format.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>

#include "common/error.h"

namespace specdec::server {

using nlohmann::json;

namespace {

const char* object_name(Endpoint e, bool chunk) {
  if (e == Endpoint::Completions) return "text_completion";  // also for its chunks
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

json base(const ResponseMeta& meta, bool chunk) {
  return json{{"id", meta.id},
              {"object", object_name(meta.endpoint, chunk)},
              {"created", meta.created},
              {"model", meta.model},
              {"system_fingerprint", "specdec"}};
}

json null_or(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

}  // namespace

const char* openai_finish_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop:
    case FinishReason::EndOfGeneration:
      return "stop";
    case FinishReason::Length:
    case FinishReason::ContextFull:
    case FinishReason::Cancelled:
      break;
  }
  return "length";
}

json usage_json(const GenerationStats& s) {
  return json{{"prompt_tokens", s.prompt_tokens},
              {"completion_tokens", s.generated_tokens},
              {"total_tokens", s.prompt_tokens + s.generated_tokens},
              {"prompt_tokens_details", {{"cached_tokens", s.cached_tokens}}}};
}

GenerationStats combined_stats(std::span<const GenerationResult> results,
                               size_t choices_per_prompt) {
  GenerationStats all;
  if (results.empty()) return all;
  all = results.front().stats;
  for (size_t i = 1; i < results.size(); ++i) {
    const GenerationStats& s = results[i].stats;
    if (choices_per_prompt > 0 && i % choices_per_prompt == 0) {
      all.prompt_tokens += s.prompt_tokens;
      all.cached_tokens += s.cached_tokens;
      all.shared_tokens += s.shared_tokens;
    }
    all.generated_tokens += s.generated_tokens;
    all.spec.rounds += s.spec.rounds;
    all.spec.drafted += s.spec.drafted;
    all.spec.accepted += s.spec.accepted;
    all.prefill_ms = std::max(all.prefill_ms, s.prefill_ms);
    all.decode_ms = std::max(all.decode_ms, s.decode_ms);
  }
  return all;
}

json specdec_stats_json(const GenerationStats& s) {
  const double tps = s.decode_ms > 0 ? s.generated_tokens * 1000.0 / s.decode_ms : 0.0;
  return json{{"speculative", s.speculative}, {"draft_max", s.draft_max},
              {"rounds", s.spec.rounds},      {"drafted", s.spec.drafted},
              {"accepted", s.spec.accepted},  {"acceptance_rate", s.spec.acceptance_rate()},
              {"tokens_per_second", tps},     {"prefill_ms", s.prefill_ms},
              {"decode_ms", s.decode_ms}};
}

namespace {

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80           ? 1
                       : (c >> 5) == 0x6  ? 2
                       : (c >> 4) == 0xe  ? 3
                       : (c >> 3) == 0x1e ? 4
                                          : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    }
    i += len;
  }
  return true;
}

// A token's text for the "token" fields. A token that holds part of a UTF-8 character is
// written as "bytes:\xNN..." (OpenAI's notation), so that distinct tokens never collapse into
// the same replacement character (they would, as keys of the completions format's top_logprobs).
std::string token_string(const std::string& bytes) {
  if (valid_utf8(bytes)) return bytes;
  std::string out = "bytes:";
  char buf[8];
  for (unsigned char c : bytes) {
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
  }
  return out;
}

// A token's name in logprobs: its text (token_string), or with LogprobFormat::token_ids vLLM's
// "token_id:N", which tells apart tokens whose texts are equal or empty.
std::string token_name(const ResponseMeta& meta, int32_t id, const std::string& text) {
  if (meta.logprobs->token_ids) return "token_id:" + std::to_string(id);
  return token_string(text);
}

}  // namespace

json logprobs_json(const ResponseMeta& meta, std::span<const TokenLogprob> entries,
                   size_t text_offset) {
  const Tokenizer& tok = *meta.logprobs->tokenizer;
  const bool chat = meta.endpoint == Endpoint::ChatCompletions;
  const auto bytes_of = [](const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(static_cast<int>(c));
    return b;
  };
  json content = json::array();
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const TokenLogprob& e : entries) {
    if (tok.is_eog(e.token) && !meta.logprobs->ignore_eos) continue;  // not text
    const std::string piece = tok.token_bytes(e.token);
    if (chat) {
      json alternatives = json::array();
      for (const auto& [id, lp] : e.top) {
        const std::string p = tok.token_bytes(id);
        alternatives.push_back(
            {{"token", token_name(meta, id, p)}, {"logprob", lp}, {"bytes", bytes_of(p)}});
      }
      content.push_back({{"token", token_name(meta, e.token, piece)},
                         {"logprob", e.logprob},
                         {"bytes", bytes_of(piece)},
                         {"top_logprobs", std::move(alternatives)}});
    } else {
      tokens.push_back(token_name(meta, e.token, piece));
      token_logprobs.push_back(e.logprob);
      json alternatives = json::object();
      for (const auto& [id, lp] : e.top)
        alternatives[token_name(meta, id, tok.token_bytes(id))] = lp;
      top.push_back(std::move(alternatives));
      offsets.push_back(text_offset);
    }
    text_offset += piece.size();
  }
  if (chat) return json{{"content", std::move(content)}, {"refusal", nullptr}};
  return json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(token_logprobs)},
              {"top_logprobs", std::move(top)},
              {"text_offset", std::move(offsets)}};
}

json echo_logprobs_json(const ResponseMeta& meta, const EchoedPrompt& prompt,
                        std::span<const TokenLogprob> entries) {
  const Tokenizer& tok = *meta.logprobs->tokenizer;
  if (prompt.tokens.empty() || entries.size() + 1 != prompt.tokens.size()) {
    fail("echo_logprobs_json: ", entries.size(), " entries for a prompt of ", prompt.tokens.size(),
         " tokens");
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  size_t offset = 0;
  for (size_t i = 0; i < prompt.tokens.size(); ++i) {
    // A control token (<|im_start|>, a BOS) has no text of its own: it is listed by its name,
    // which the offsets count only where the echoed prompt shows it (a prompt that spelled it
    // out), not where the tokenizer added it.
    std::string piece = tok.token_bytes(prompt.tokens[i]);
    std::string shown = piece;
    if (piece.empty()) {
      shown = tok.token_text(prompt.tokens[i]);
      if (prompt.text.compare(std::min(offset, prompt.text.size()), shown.size(), shown) == 0) {
        piece = shown;
      }
    }
    tokens.push_back(token_name(meta, prompt.tokens[i], shown));
    offsets.push_back(offset);
    offset += piece.size();
    if (i == 0) {
      token_logprobs.push_back(nullptr);
      top.push_back(nullptr);
      continue;
    }
    const TokenLogprob& e = entries[i - 1];
    token_logprobs.push_back(e.logprob);
    json alternatives = json::object();
    const size_t shown_top = std::min(e.top.size(), static_cast<size_t>(meta.logprobs->top_n));
    for (size_t k = 0; k < shown_top; ++k) {
      const auto& [id, lp] = e.top[k];
      alternatives[token_name(meta, id, tok.token_bytes(id))] = lp;
    }
    top.push_back(std::move(alternatives));
  }
  return json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(token_logprobs)},
              {"top_logprobs", std::move(top)},
              {"text_offset", std::move(offsets)}};
}

json prompt_logprobs_json(const Tokenizer& tok, std::span<const int32_t> prompt,
                          std::span<const TokenLogprob> entries, int32_t top_n) {
  if (prompt.empty() || entries.size() + 1 != prompt.size()) {
    fail("prompt_logprobs_json: ", entries.size(), " entries for a prompt of ", prompt.size(),
         " tokens");
  }
  json out = json::array({nullptr});
  for (const TokenLogprob& e : entries) {
    json m = json::object();
    // The alternatives' ranks: 1 + those strictly more likely, which all come before them.
    const size_t shown = std::min(e.top.size(), static_cast<size_t>(std::max(0, top_n)));
    for (size_t k = 0; k < shown; ++k) {
      const auto& [id, lp] = e.top[k];
      int32_t rank = 1;
      while (rank <= static_cast<int32_t>(k) && e.top[static_cast<size_t>(rank - 1)].second > lp) {
        ++rank;
      }
      m[std::to_string(id)] = {
          {"logprob", lp}, {"rank", rank}, {"decoded_token", token_string(tok.token_bytes(id))}};
    }
    m[std::to_string(e.token)] = {{"logprob", e.logprob},
                                  {"rank", e.rank},
                                  {"decoded_token", token_string(tok.token_bytes(e.token))}};
    out.push_back(std::move(m));
  }
  return out;
}

void append_logprobs(json& into, const json& more) {
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
    json& list = into.at(key);
    for (const json& v : more.at(key)) list.push_back(v);
  }
}

json completion_json(const ResponseMeta& meta, std::span<const GenerationResult> results,
                     std::span<const EchoedPrompt> echoes, size_t choices_per_prompt) {
  if (!echoes.empty() && echoes.size() != results.size()) {
    fail("completion_json: ", echoes.size(), " echoed prompts for ", results.size(), " choices");
  }
  json doc = base(meta, /*chunk=*/false);
  json choices = json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    const GenerationResult& result = results[i];
    const EchoedPrompt* echo = echoes.empty() ? nullptr : &echoes[i];
    json choice = {{"index", i}, {"finish_reason", openai_finish_reason(result.finish)}};
    if (meta.endpoint == Endpoint::Completions) {
      choice["text"] = echo ? echo->text + result.text : result.text;
    } else if (!meta.tool_names.empty()) {
      const SplitReply reply =
          split_tool_calls(result.text, meta.tool_names, tool_call_seed(meta, i));
      json message = {{"role", "assistant"}, {"content", reply.content}};
      if (!reply.calls.empty()) {
        if (reply.content.empty()) message["content"] = nullptr;
        if (meta.legacy_functions) {
          message["function_call"] = function_call_json(reply.calls.front());
          choice["finish_reason"] = "function_call";
        } else {
          message["tool_calls"] = tool_calls_json(reply.calls, false);
          choice["finish_reason"] = "tool_calls";
        }
      }
      choice["message"] = std::move(message);
    } else {
      choice["message"] = {{"role", "assistant"}, {"content", result.text}};
    }
    json lp;
    if (meta.logprobs) {
      const size_t offset = echo ? echo->text.size() : 0;
      lp = logprobs_json(meta, result.logprobs, offset);
      if (echo) {
        json all = echo_logprobs_json(meta, *echo, result.prompt_logprobs);
        append_logprobs(all, lp);
        lp = std::move(all);
      }
    }
    choice["logprobs"] = std::move(lp);
    choices.push_back(std::move(choice));
  }
  doc["choices"] = std::move(choices);
  const GenerationStats all = combined_stats(results, choices_per_prompt);
  doc["usage"] = usage_json(all);
  doc["specdec"] = specdec_stats_json(all);
  return doc;
}

json completion_json(const ResponseMeta& meta, const GenerationResult& result) {
  return completion_json(meta, std::span<const GenerationResult>(&result, 1));
}

json text_chunk_json(const ResponseMeta& meta, std::string_view text, bool first,
                     const json& logprobs, int32_t index) {
  json doc = base(meta, /*chunk=*/true);
  json choice = {{"index", index}, {"finish_reason", nullptr}, {"logprobs", logprobs}};
  if (meta.endpoint == Endpoint::Completions) {
    choice["text"] = std::string(text);
  } else {
    choice["delta"] = {{"content", std::string(text)}};
    if (first) choice["delta"]["role"] = "assistant";  // OpenAI names the role once, first
  }
  doc["choices"] = json::array({choice});
  return doc;
}

json reasoning_chunk_json(const ResponseMeta& meta, std::string_view text, bool first,
                          const json& logprobs, int32_t index) {
  json doc = text_chunk_json(meta, "", first, logprobs, index);
  json& delta = doc["choices"][0]["delta"];
  delta.erase("content");
  delta["reasoning_content"] = std::string(text);
  return doc;
}

uint64_t tool_call_seed(const ResponseMeta& meta, size_t index) {
  return std::hash<std::string>{}(meta.id) ^ (0x9E3779B97F4A7C15ull * (index + 1));
}

json tool_calls_json(const std::vector<ToolCall>& calls, bool streamed) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c = {{"id", calls[i].id},
              {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (streamed) c["index"] = i;
    out.push_back(std::move(c));
  }
  return out;
}

json function_call_json(const ToolCall& call) {
  return {{"name", call.name}, {"arguments", call.arguments}};
}

json tool_calls_chunk_json(const ResponseMeta& meta, const std::vector<ToolCall>& calls, bool first,
                           const json& logprobs, int32_t index) {
  json doc = base(meta, /*chunk=*/true);
  json delta = meta.legacy_functions ? json{{"function_call", function_call_json(calls.front())}}
                                     : json{{"tool_calls", tool_calls_json(calls, true)}};
  if (first) delta["role"] = "assistant";
  doc["choices"] = json::array(
      {{{"index", index}, {"finish_reason", nullptr}, {"logprobs", logprobs}, {"delta", delta}}});
  return doc;
}

json final_chunk_json(const ResponseMeta& meta, const GenerationResult& result,
                      const json& logprobs, int32_t index, bool tool_calls) {
  json doc = base(meta, /*chunk=*/true);
  json choice = {{"index", index},
                 {"finish_reason", !tool_calls             ? openai_finish_reason(result.finish)
                                   : meta.legacy_functions ? "function_call"
                                                           : "tool_calls"},
                 {"logprobs", logprobs}};
  if (meta.endpoint == Endpoint::Completions) {
    choice["text"] = "";
  } else {
    choice["delta"] = json::object();
  }
  doc["choices"] = json::array({choice});
  doc["usage"] = usage_json(result.stats);
  doc["specdec"] = specdec_stats_json(result.stats);
  return doc;
}

json usage_chunk_json(const ResponseMeta& meta, const GenerationStats& stats) {
  json doc = base(meta, /*chunk=*/true);
  doc["choices"] = json::array();
  doc["usage"] = usage_json(stats);
  return doc;
}

std::string to_wire(const json& doc) {
  return doc.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

std::string sse_event(const json& doc) { return "data: " + to_wire(doc) + "\n\n"; }

json error_json(const ApiError& e) {
  return json{{"error",
               {{"message", e.what()},
                {"type", e.type()},
                {"param", null_or(e.param())},
                {"code", null_or(e.code())}}}};
}

json models_json(const std::string& model_id, int64_t created) {
  // RFC 3339 in UTC, as Anthropic's created_at.
  const auto t = static_cast<std::time_t>(created);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return json{{"object", "list"},
              {"data", json::array({{{"id", model_id},
                                     {"object", "model"},
                                     {"created", created},
                                     {"owned_by", "specdec"},
                                     {"type", "model"},
                                     {"display_name", model_id},
                                     {"created_at", when}}})},
              {"has_more", false},
              {"first_id", model_id},
              {"last_id", model_id}};
}

}  // namespace specdec::server
