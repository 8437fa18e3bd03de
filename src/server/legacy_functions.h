// OpenAI's deprecated function calling on /v1/chat/completions, which older clients still send
// (LangChain.js's function-calling chains, agent frameworks written against the 2023 API):
// "functions" and "function_call" in the request, role "function" messages, assistant messages
// with a "function_call", and replies that carry message.function_call with finish_reason
// "function_call". It is read as the tools form it stands for and validated by that form's
// parser (server/tool_calls.h), so both forms follow one set of rules; its errors name the fields
// the client sent. A reply holds at most one call, as the deprecated form has room for one.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "server/request_parsing.h"

namespace specdec::server {

// Whether the body uses any of the deprecated form: "functions" (not null, not an empty array)
// or "function_call" given, a message with role "function", or an assistant message with a
// "function_call".
bool uses_legacy_functions(const nlohmann::ordered_json& body);

// The body in the tools form: "functions" -> "tools" (each function wrapped as {"type":
// "function", "function": f}), "function_call" ("none", "auto" or {"name": n}) -> "tool_choice",
// "parallel_tool_calls" false; role "function" messages -> role "tool"; an assistant's
// "function_call" -> its "tool_calls". A 400 naming the client's field for a body that mixes the
// forms ("functions" with "tools", "function_call" with "tool_choice", a message with both) or
// gives a field the wrong shape.
nlohmann::ordered_json legacy_functions_as_tools(const nlohmann::ordered_json& body);

// A request field of the tools form named as the client sent it: tools[i].function.x ->
// functions[i].x, tools -> functions, tool_choice -> function_call. (A translated message's
// tool_calls[...] is named messages[i].function_call by parse_chat_request.)
std::string legacy_functions_param(const std::string& param);

// A chat body as the chat parser reads it: the deprecated form translated first when the body
// uses it. `legacy_reply` says whether the reply takes the deprecated shape (the request gave
// "functions" or "function_call"; a conversation that only records earlier function turns is
// answered in the tools form it asked for). The server's `defaults` fill what the body leaves out.
CompletionRequest parse_chat_request(std::string_view body, bool& legacy_reply,
                                     const RequestDefaults& defaults = {});

}  // namespace specdec::server
