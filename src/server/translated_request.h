// What the translation layers share (Anthropic's Messages API, OpenAI's Responses API): each
// turns its body into the chat-completions body it means and lets the chat parser validate it,
// so that every endpoint applies the same rules; errors are then renamed to the fields the
// client sent.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "server/api_error.h"
#include "server/request_parsing.h"

namespace specdec::server {

// The body as ordered JSON (a schema keeps its key order): 400 when it nests too deeply, is not
// JSON, or is not an object.
nlohmann::ordered_json parse_translated_body(std::string_view body);

// The request a translated body means to the chat (or completions) endpoint's parser; an
// ApiError from the parser is rethrown with its field renamed by `client_name` (the OpenAI
// field -> the client's), in the message too. The server's `defaults` fill what the translated
// body leaves out (server/request_defaults.h).
CompletionRequest parse_translated_request(
    Endpoint endpoint, const nlohmann::ordered_json& body,
    const std::function<std::string(const std::string&)>& client_name,
    const RequestDefaults& defaults = {});
inline CompletionRequest parse_translated_chat(
    const nlohmann::ordered_json& chat_body,
    const std::function<std::string(const std::string&)>& client_name,
    const RequestDefaults& defaults = {}) {
  return parse_translated_request(Endpoint::ChatCompletions, chat_body, client_name, defaults);
}

// `p` with its leading field `from` (the whole name, or followed by '.' or '[') replaced by `to`;
// nullopt when `p` does not start with that field.
std::optional<std::string> renamed_prefix(const std::string& p, std::string_view from,
                                          std::string_view to);

// A field inside a chat tool's function, "tools[i].function" followed by `rest` (".name",
// ".parameters...", or "" for the function itself), split for a translation that names it its
// own way: `index` is "[i]". nullopt for any other field.
struct ToolFunctionParam {
  std::string index;
  std::string rest;
};
std::optional<ToolFunctionParam> tool_function_param(const std::string& p);

}  // namespace specdec::server
