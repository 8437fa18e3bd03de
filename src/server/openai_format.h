// The JSON documents the server sends, in the shapes of OpenAI's API: completion and chat
// completion objects, their streaming chunks (server-sent events), usage, errors and the model
// list. Each response also carries a "specdec" object with the request's speculative-decoding
// statistics, an extension that OpenAI clients ignore.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/reasoning.h"
#include "server/request_parsing.h"
#include "server/tool_calls.h"

namespace specdec::server {

// How a response that asked for logprobs renders them: token strings come from the tokenizer;
// the end-of-generation token is not part of the text and is left out unless ignore_eos made it
// ordinary text.
struct LogprobFormat {
  const Tokenizer* tokenizer = nullptr;
  bool ignore_eos = false;
  bool token_ids = false;           // tokens named "token_id:N" (vLLM's return_tokens_as_token_ids)
  int32_t top_n = kMaxTopLogprobs;  // alternatives shown per token (entries may hold more)
};

// With `echo` (completions): what a choice repeats before its text, the prompt as given (a
// token prompt decoded) and its tokens.
struct EchoedPrompt {
  std::string text;
  std::vector<int32_t> tokens;
};

// What every document of one response shares.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::Completions;
  std::string id;  // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;
  std::string model;
  std::optional<LogprobFormat> logprobs;  // set when the request asked for logprobs
  // Chat with tools: the functions a reply may call (server/tool_calls.h); a reply's calls are
  // split off into message.tool_calls. Empty: replies are plain content.
  std::vector<std::string> tool_names = {};
  // The request used OpenAI's deprecated function calling (server/legacy_functions.h): a reply's
  // call goes out as message.function_call (the first, the only one the form has room for) with
  // finish_reason "function_call".
  bool legacy_functions = false;
  // A thinking model's chat replies: a leading <think> block goes out as reasoning_content
  // (server/reasoning.h).
  ReasoningMode reasoning = {};
};

// The ids of a choice's tool calls derive from this (the response id and the choice).
uint64_t tool_call_seed(const ResponseMeta& meta, size_t index);
// message.tool_calls (or, streamed, delta.tool_calls with each call's index).
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls, bool streamed);
// message.function_call (or, streamed, delta.function_call): the deprecated form's one call.
nlohmann::json function_call_json(const ToolCall& call);
// A streamed chunk carrying a choice's tool calls whole (with meta.legacy_functions, its first
// call as delta.function_call).
nlohmann::json tool_calls_chunk_json(const ResponseMeta& meta, const std::vector<ToolCall>& calls,
                                     bool first, const nlohmann::json& logprobs, int32_t index);

// "stop" or "length" (a full context counts as length, like OpenAI's API).
const char* openai_finish_reason(FinishReason reason);

nlohmann::json usage_json(const GenerationStats& stats);
// The stats of a request's choices together (n > 1): one prompt (prompt and cached tokens as
// the first choice's), generated tokens, rounds, drafts and acceptances summed, and the wall
// times of the slowest choice (the choices run side by side), so that tokens_per_second is the
// request's aggregate rate.
// With several prompts (choices_per_prompt > 0: results[k] is prompt k / choices_per_prompt's),
// prompt and cached tokens are summed over the prompts.
GenerationStats combined_stats(std::span<const GenerationResult> results,
                               size_t choices_per_prompt = 0);
// rounds, drafted, accepted, acceptance_rate, decode tokens/s and timings of one request.
nlohmann::json specdec_stats_json(const GenerationStats& stats);

// A choice's "logprobs" for these tokens (meta.logprobs must be set). Chat: {"content": [{token,
// logprob, bytes, top_logprobs: [{token, logprob, bytes}]}], "refusal": null}. Completions:
// {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}, the offsets in bytes
// of the generated text, counted from `text_offset` (the text before these tokens).
nlohmann::json logprobs_json(const ResponseMeta& meta, std::span<const TokenLogprob> entries,
                             size_t text_offset);

// The echoed prompt's part of a completions choice's "logprobs": every prompt token, the first
// with null logprob and top_logprobs (nothing precedes it), the others with `entries`
// (GenerationResult::prompt_logprobs, one per token after the first); text offsets from 0.
// Control tokens in the prompt are listed like any other: they were given as input.
nlohmann::json echo_logprobs_json(const ResponseMeta& meta, const EchoedPrompt& prompt,
                                  std::span<const TokenLogprob> entries);
// vLLM's prompt_logprobs for a prompt: null for its first token, then per token a map from
// token id (as a string) to {logprob, rank, decoded_token} holding the token itself and its
// top_n alternatives; entries are GenerationResult::prompt_logprobs.
nlohmann::json prompt_logprobs_json(const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                                    std::span<const TokenLogprob> entries, int32_t top_n);

// Appends the completions-format logprobs `more` (tokens, token_logprobs, top_logprobs,
// text_offset) to `into`.
void append_logprobs(nlohmann::json& into, const nlohmann::json& more);

// The non-streaming response (with result.logprobs when meta.logprobs is set): choice i is
// results[i]; usage and specdec are combined_stats over all of them. With echoes (one per
// choice; completions), each choice's text and logprobs start with its prompt's.
nlohmann::json completion_json(const ResponseMeta& meta, std::span<const GenerationResult> results,
                               std::span<const EchoedPrompt> echoes = {},
                               size_t choices_per_prompt = 0);
nlohmann::json completion_json(const ResponseMeta& meta, const GenerationResult& result);

// Streaming: a chunk of text, the last chunk (finish_reason, usage, specdec) and, when the
// client asked for stream_options.include_usage, OpenAI's separate usage chunk (no choices).
// `logprobs`: the chunk's choice.logprobs (logprobs_json of its tokens), null when not asked;
// `index`: the choice (n > 1), whose final chunk carries its own usage and specdec.
nlohmann::json text_chunk_json(const ResponseMeta& meta, std::string_view text, bool first,
                               const nlohmann::json& logprobs = nullptr, int32_t index = 0);
// A chat chunk of a thinking model's reasoning: delta.reasoning_content (vLLM's and
// llama-server's field), the role on the first.
nlohmann::json reasoning_chunk_json(const ResponseMeta& meta, std::string_view text, bool first,
                                    const nlohmann::json& logprobs, int32_t index);
// `tool_calls`: the choice ended in calls (finish_reason "tool_calls").
nlohmann::json final_chunk_json(const ResponseMeta& meta, const GenerationResult& result,
                                const nlohmann::json& logprobs = nullptr, int32_t index = 0,
                                bool tool_calls = false);
nlohmann::json usage_chunk_json(const ResponseMeta& meta, const GenerationStats& stats);

// One server-sent event: "data: <json>\n\n". Invalid UTF-8 is replaced, never thrown on.
std::string sse_event(const nlohmann::json& doc);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

nlohmann::json error_json(const ApiError& error);
// The model list in OpenAI's shape (object, created, owned_by) and Anthropic's (type,
// display_name, created_at, has_more, first_id, last_id) at once: each client reads its fields.
nlohmann::json models_json(const std::string& model_id, int64_t created);

// Serializes a document for the wire (invalid UTF-8 replaced by U+FFFD).
std::string to_wire(const nlohmann::json& doc);

}  // namespace specdec::server
