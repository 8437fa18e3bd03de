#include "server/request_defaults.h"

#include "common/error.h"
#include "server/json_fields.h"
#include "server/request_parsing.h"

namespace specdec::server {

using nlohmann::json;
using nlohmann::ordered_json;

const json* RequestDefaults::find(const char* name) const {
  const auto it = fields.find(name);
  return it == fields.end() || it->is_null() ? nullptr : &*it;
}

ordered_json RequestDefaults::value_or(const char* name, ordered_json fallback) const {
  const json* v = find(name);
  return v != nullptr ? ordered_json(*v) : std::move(fallback);  // a conversion, no text between
}

RequestDefaults RequestDefaults::without(std::initializer_list<const char*> names) const {
  RequestDefaults out = *this;
  for (const char* name : names) out.fields.erase(name);
  return out;
}

namespace {

// llama-server's reading of a request's reasoning budget: none given, or -1, is the server's
// --reasoning-budget.
bool budget_is_the_servers(const json& body) {
  const json* v = field(body, reasoning_budget_field(body));
  return v == nullptr || *v == -1;
}

}  // namespace

void fill_defaults(json& body, const RequestDefaults& defaults) {
  if (!body.is_object()) return;  // the parser refuses it next
  for (const auto& [name, value] : defaults.fields.items()) {
    const auto it = body.find(name);
    const bool unset = name == "reasoning_budget_tokens" ? budget_is_the_servers(body)
                                                         : it == body.end() || it->is_null();
    if (unset) {
      body[name] = value;
    } else if (name == "chat_template_kwargs" && it->is_object() && value.is_object()) {
      // The template's variables one by one (--reasoning-budget 0's enable_thinking stays
      // unless the request sets that one): a request naming another keeps the server's.
      for (const auto& [key, v] : value.items()) {
        if (!it->contains(key)) (*it)[key] = v;
      }
    }
  }
}

void check_request_defaults(const RequestDefaults& defaults) {
  if (!defaults.fields.is_object()) fail("the server's request defaults must be a JSON object");
  // Each endpoint's own checks: the completions parser reads every sampling field the chat
  // parser does, and the chat one also its max_completion_tokens rule.
  const char* bodies[] = {R"({"prompt": "x"})",
                          R"({"messages": [{"role": "user", "content": "x"}]})"};
  const Endpoint endpoints[] = {Endpoint::Completions, Endpoint::ChatCompletions};
  for (size_t i = 0; i < 2; ++i) (void)parse_request(endpoints[i], bodies[i], defaults);
}

}  // namespace specdec::server
