// The server's own defaults for what a request leaves out: `specdec serve --temp 0.7 -n 256 ...`
// as llama-server takes its sampling flags. A request's value always wins; where the request
// says nothing, the server's default applies, and only where the server has none does the
// endpoint's own default (OpenAI's temperature 1, llama-server's /completion top-k 40, Ollama's
// repeat penalty 1.1) apply.
//
// The defaults are fields of a chat-completions body, by the names the chat parser reads
// (temperature, top_k, max_tokens, seed, samplers, repeat_penalty, dry_multiplier, ...), so that
// every endpoint checks them with the same rules as a request's own, and every endpoint gets
// them the same way: the translators (Anthropic's, OpenAI's Responses, Ollama's, llama-server's
// /completion) write their own defaults only where the server has none, and parse_request fills
// in the rest.
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

namespace specdec::server {

struct RequestDefaults {
  nlohmann::json fields = nlohmann::json::object();

  bool empty() const { return fields.empty(); }
  // The server's default for a chat-completions field, nullptr when it has none.
  const nlohmann::json* find(const char* name) const;
  // The server's default for `name`, or `fallback` (the endpoint's own default) when it has none.
  nlohmann::ordered_json value_or(const char* name, nlohmann::ordered_json fallback) const;
  // These defaults without `names`: for a request that set those fields in its own terms (Ollama's
  // num_predict -1, "no limit", leaves no field behind in the chat body, yet must not get the
  // server's max_tokens).
  RequestDefaults without(std::initializer_list<const char*> names) const;
};

// Writes every default field `body` lacks (absent or null: a client's null means "the default")
// into it.
void fill_defaults(nlohmann::json& body, const RequestDefaults& defaults);

// Checks the defaults as a request carrying them would be checked, on both endpoints: throws the
// ApiError such a request would get (its param() names the field; the caller knows which flag
// set it), or specdec::Error when `fields` is not an object.
void check_request_defaults(const RequestDefaults& defaults);

}  // namespace specdec::server
