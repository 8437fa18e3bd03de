// Anthropic's Messages API (POST /v1/messages and /v1/messages/count_tokens), the API Claude
// Code and the `anthropic` SDKs speak, over the same engine as the OpenAI endpoints.
//
// A request is translated into the chat-completions request it means (system prompt, turns,
// tool_use / tool_result blocks, tools, tool_choice, stop_sequences, output_config.format) and
// validated by the same rules, with errors naming Anthropic's fields. A final assistant turn is
// a prefill: the reply continues it. Responses are Anthropic's message object, or its stream of
// named events (message_start, content_block_start/delta/stop, message_delta, message_stop).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/reasoning.h"
#include "server/request_parsing.h"
#include "server/tool_calls.h"

namespace specdec::server {

// Parses and validates a body into the chat request it means: the turns and settings as the
// chat endpoint takes them, a final assistant turn (without tool_use blocks) as the prefill, and
// max_tokens Anthropic's (required on /v1/messages; `count_only`: /v1/messages/count_tokens,
// which has none and no sampling). Throws ApiError naming Anthropic's fields. The server's
// `defaults` fill the sampling fields the body leaves out (not with count_only).
CompletionRequest parse_messages_request(std::string_view body, bool count_only,
                                         const RequestDefaults& defaults = {});

// Anthropic's error object {"type": "error", "error": {"type": ..., "message": ...}} with the
// error type its API uses for the status (invalid_request_error, authentication_error,
// not_found_error, request_too_large, overloaded_error, api_error, ...).
nlohmann::json anthropic_error_json(const ApiError& error);

// What every document of one response shares.
struct MessagesMeta {
  std::string id;                       // "msg_..."
  std::string model;                    // as the request named it
  std::vector<std::string> tool_names;  // empty: the reply is text only
  uint64_t tool_id_seed = 0;            // makes the tool_use ids
  // A thinking model's replies: a leading <think> block is a thinking content block
  // (server/reasoning.h).
  ReasoningMode reasoning = {};
};

// The reply split into its text and tool calls (ids "toolu_..."), as the response carries it.
SplitReply split_reply(const MessagesMeta& meta, std::string_view text);

// end_turn, max_tokens, stop_sequence, tool_use or model_context_window_exceeded.
const char* anthropic_stop_reason(const GenerationResult& result, bool tool_use);

// usage: input_tokens (the prompt's tokens not served from the cache), cache_read_input_tokens
// (those reused from a slot's cache), cache_creation_input_tokens 0, output_tokens.
nlohmann::json anthropic_usage_json(const GenerationStats& stats);

// The whole response (stream false): a thinking block first when the reply reasons (its
// signature empty: there is no Anthropic key to sign it with, and this server ignores the
// signatures of thinking blocks sent back), then text and tool_use blocks.
nlohmann::json message_json(const MessagesMeta& meta, const GenerationResult& result);

// Streaming. One event: "event: <type>\ndata: <json>\n\n" (invalid UTF-8 replaced).
std::string anthropic_event(const nlohmann::json& data);
// The opening event: the message with no content yet; usage counts the whole prompt as input
// (the cache's share is known once the generation ends, and message_delta then says it).
nlohmann::json message_start_json(const MessagesMeta& meta, int32_t prompt_tokens);
nlohmann::json text_block_start_json(int32_t index);
nlohmann::json thinking_block_start_json(int32_t index);
nlohmann::json thinking_delta_json(int32_t index, std::string_view thinking);
// Closes a thinking block's content before its content_block_stop, as Anthropic's stream does.
nlohmann::json signature_delta_json(int32_t index);
nlohmann::json text_delta_json(int32_t index, std::string_view text);
nlohmann::json tool_use_block_start_json(int32_t index, const ToolCall& call);
// The call's whole input as one input_json_delta (the call is complete when it is sent).
nlohmann::json input_json_delta_json(int32_t index, const ToolCall& call);
nlohmann::json block_stop_json(int32_t index);
nlohmann::json message_delta_json(const GenerationResult& result, bool tool_use);
nlohmann::json message_stop_json();

}  // namespace specdec::server
