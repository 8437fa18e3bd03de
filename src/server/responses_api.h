// OpenAI's Responses API (POST /v1/responses), which newer OpenAI clients and agents (the
// Agents SDK, Codex CLI) speak and vLLM serves, over the same engine as the chat endpoint.
//
// A request is translated into the chat request it means (instructions, input messages and
// function_call / function_call_output items, function tools, tool_choice, text.format,
// max_output_tokens) and validated by the chat rules, with errors naming the Responses fields.
// Nothing is stored: previous_response_id and background are refused, and the whole
// conversation is sent as input each time. Responses are the response object, or its stream of
// typed events (response.created ... response.completed), each with a sequence number.
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

struct ResponsesRequest {
  CompletionRequest chat;
  // The request's own fields the response object repeats (instructions, max_output_tokens,
  // temperature, top_p, tools, tool_choice, parallel_tool_calls, text, metadata), with the
  // server's defaults, or else the API's, filled in.
  nlohmann::json echo;
};

// Parses and validates a body. Throws ApiError naming the Responses API's fields. The server's
// `defaults` fill what the body leaves out (max_tokens standing for max_output_tokens).
ResponsesRequest parse_responses_request(std::string_view body,
                                         const RequestDefaults& defaults = {});

// What every document of one response shares.
struct ResponsesMeta {
  std::string id;  // "resp_..."; its hex part also names the output items
  int64_t created_at = 0;
  std::string model;
  std::vector<std::string> tool_names;  // empty: the reply is text only
  uint64_t tool_id_seed = 0;
  nlohmann::json echo;  // ResponsesRequest::echo
  // A thinking model's replies: a leading <think> block is a reasoning item
  // (server/reasoning.h).
  ReasoningMode reasoning = {};
};

// The reply as output items: a thinking model's reasoning item ("rs_...", its text one
// reasoning_text part, as vLLM returns it), a message with one output_text part (when there is
// text, or no call), then one function_call item per call ("fc_..." items, "call_..." call ids).
nlohmann::json output_items(const ResponsesMeta& meta, const GenerationResult& result);
// The reasoning item, whole (status completed) or as it opens (no text yet, in_progress).
nlohmann::json reasoning_item_json(const ResponsesMeta& meta, std::string_view text, bool done);

// The response object: status completed, or incomplete (incomplete_details.reason
// max_output_tokens) when the length or the context ended it; usage with cached tokens and
// `reasoning_tokens` (count_reasoning_tokens).
nlohmann::json response_json(const ResponsesMeta& meta, const GenerationResult& result,
                             int64_t reasoning_tokens = 0);
// The object before any output: status in_progress, output empty, usage null.
nlohmann::json response_in_progress_json(const ResponsesMeta& meta);

// Streaming: numbers the events and renders "event: <type>\ndata: <json>\n\n".
class ResponseEvents {
 public:
  std::string operator()(nlohmann::json event);

 private:
  int64_t next_ = 0;
};

}  // namespace specdec::server
