// Validation of OpenAI-style request bodies for /v1/completions and /v1/chat/completions.
// Every rule throws ApiError with the status OpenAI would use (400 for malformed JSON, wrong
// types and out-of-range values, 404 for an unknown model), naming the offending parameter, so
// nothing unchecked reaches the engine. Unknown fields are ignored, as OpenAI clients send
// optional fields (user, penalties, ...) that do not change greedy or sampled output here.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "sampling/distribution.h"
#include "sampling/penalties.h"
#include "server/api_error.h"
#include "server/lora_api.h"
#include "server/reasoning.h"
#include "server/request_defaults.h"
#include "server/tool_calls.h"
#include "tokenizer/chat_template.h"

namespace specdec::server {

enum class Endpoint { Completions, ChatCompletions };

// One completions prompt: text, tokenized as the server tokenizes prompts, or token ids taken
// as they are (OpenAI's and vLLM's array-of-integers form; lm-evaluation-harness sends these).
struct PromptInput {
  std::string text;
  std::optional<std::vector<int32_t>> tokens;
};

// OpenAI's sampling defaults: temperature 1, no top-k, top-p or min-p filtering.
inline SamplingParams openai_sampling_defaults() {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  return p;
}

struct CompletionRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::string model;  // "" when not given
  // Completions: one or more prompts (a string, an array of strings, an array of token ids or an
  // array of such arrays); each gets n choices, prompt p's choice i at index p * n + i.
  std::vector<PromptInput> prompts;
  // Completions: fill in the middle between each (text) prompt and this text, with the model's
  // FIM markers; empty: none.
  std::string suffix;
  std::vector<ChatMessage> messages;  // chat completions
  // Chat: the template's opening of the assistant turn after the messages (vLLM's
  // add_generation_prompt), and text that turn already holds, which the reply continues (vLLM's
  // continue_final_message takes it from a final assistant message; Anthropic's API always
  // does). The reply is only the continuation.
  bool add_generation_prompt = true;
  std::string prefill;
  // A thinking template's switch (chat_template_kwargs.enable_thinking, Ollama's think,
  // Anthropic's thinking.type); nullopt: the template's default, which is to think.
  std::optional<bool> enable_thinking;
  // llama-server's reasoning_format (server/reasoning.h): whether a thinking template's reply is
  // split into reasoning and content (chat requests; the server's --reasoning-format when the
  // request leaves it out).
  ReasoningFormat reasoning_format = ReasoningFormat::Auto;
  // llama-server's reasoning_budget_tokens and reasoning_budget_message (GenerationOptions::
  // reasoning_budget; the server's --reasoning-budget N and --reasoning-budget-message when the
  // request leaves them out); -1: no budget.
  int32_t reasoning_budget = -1;
  std::string reasoning_budget_message;
  std::optional<int32_t> max_tokens;  // nullopt: the endpoint's default (see resolve_max_tokens)
  // max_tokens is the server's default (`serve -n`), not the client's: a limit past the context
  // then ends at the context's end, as llama-server's -n does, instead of a 400.
  bool max_tokens_from_server = false;
  // OpenAI's defaults: temperature 1, no top-p/top-k/min-p filtering; llama.cpp's further
  // filters read as extensions (llama-server's names: typical_p, top_n_sigma, xtc_*, dynatemp_*,
  // mirostat*), off by default. sampling.seed is unused here: see seed.
  SamplingParams sampling = openai_sampling_defaults();
  // llama-server's `samplers` list, when the request gave one (sampling/sampler_sequence.h): the
  // stages that act, in its order; it has switched the others off in `sampling` and `penalties`
  // and put the temperature first or last.
  std::vector<std::string> samplers;
  // llama-server's per-request `lora` list (server/lora_api.h): the scales it asks for are
  // taken, against the adapters the target runs with, when the request is served.
  std::vector<LoraRequestEntry> lora;
  std::optional<uint64_t> seed;  // nullopt: a random seed per request
  std::vector<std::string> stop;
  int32_t n = 1;  // choices, each its own sequence
  // /v1/completions: this many sequences per prompt, of which the n with the highest mean
  // log-probability per token come back (server/best_of.h); never streamed. Equal to n
  // elsewhere.
  int32_t best_of = 1;
  PenaltyParams penalties;  // presence/frequency/repetition penalties, logit_bias
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Extensions.
  bool speculative = true;           // use the draft model when one is loaded
  std::optional<int32_t> draft_max;  // γ; nullopt: the server's --draft-max
  // llama-server's speculative.n_min and speculative.p_min (DraftLengthParams::min_drafts,
  // DraftLengthParams::p_min); nullopt: the server's --draft-min and --draft-p-min.
  // speculative.n_max is draft_max's other name (0: no speculation, as there).
  std::optional<int32_t> draft_min;
  std::optional<float> draft_p_min;
  bool ignore_eos = false;
  // llama-server's id_slot: run on this slot (waiting for it when busy), e.g. to save its cache
  // afterwards (POST /slots/{id}?action=save); -1: the free slot whose cache fits best.
  int32_t id_slot = -1;
  // vLLM's: token ids that end the text like the end-of-generation token, and how many tokens
  // come before anything that would end it.
  std::vector<int32_t> stop_token_ids;
  int32_t min_tokens = 0;
  int32_t logprobs = -1;  // alternatives per token to report (0..20); -1: no logprobs
  // Completions: each choice's text starts with its prompt, and with logprobs the prompt's
  // tokens come first in them (the first with a null logprob); max_tokens may then be 0, which
  // scores the prompt and generates nothing.
  bool echo = false;
  // vLLM's prompt_logprobs: each prompt token's logprob, rank and this many alternatives
  // (0..20); -1: none. Not with stream.
  int32_t prompt_logprobs = -1;
  // vLLM's extension: logprobs name tokens "token_id:N" instead of by their text.
  bool tokens_as_ids = false;
  // Structured output (response_format json_object/json_schema, grammar, json_schema,
  // guided_json, guided_grammar, guided_choice), compiled; null: free text.
  std::shared_ptr<const Grammar> grammar;
  // A lazy grammar's trigger (GenerationOptions::grammar_trigger): tool_choice auto's calls.
  std::string grammar_trigger;
  // Chat: OpenAI's tools, tool_choice and parallel_tool_calls (server/tool_calls.h). With
  // tool_choice required or a named function, `grammar` is the calls' grammar.
  ToolRequest tools;
};

inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopTokenIds = 64;
inline constexpr int32_t kMaxChoices = 16;
// Prompts times n: each choice is a job, and each job takes a place in the queue.
inline constexpr int32_t kMaxChoicesPerRequest = 64;
inline constexpr int32_t kMaxDraftMax = 64;
// The speculative fields: specdec's (speculative, draft_max) and llama-server's
// (speculative.n_max, .n_min, .p_min). Every translated endpoint (/completion, Ollama's,
// Anthropic's, the Responses API) passes them on as they came (copy_fields).
inline constexpr std::array<const char*, 5> kSpeculativeFields = {
    "speculative", "draft_max", "speculative.n_max", "speculative.n_min", "speculative.p_min"};
inline constexpr size_t kMaxJsonDepth = 64;

// How deeply arrays and objects nest in JSON text (strings skipped), without parsing it.
size_t json_nesting_depth(std::string_view text);
// A request body: JSON no deeper than kMaxJsonDepth, of any kind; a 400 otherwise.
nlohmann::json parse_json_value(std::string_view body);
// The same, and an object; a 400 otherwise.
nlohmann::json parse_body(std::string_view body);
// The body's "model" ("" when absent or null); a 400 when it is no string.
std::string get_model(const nlohmann::json& body);
// Which field holds a chat request's reasoning budget, as llama-server reads it:
// reasoning_budget_tokens, or its alias thinking_budget_tokens where only that one is set (not
// null). A value of -1 there is the server's --reasoning-budget (fill_defaults).
const char* reasoning_budget_field(const nlohmann::json& body);
// A token id array (non-empty, every element an integer in [0, INT32_MAX]), or nullopt when v is
// not an array of numbers; a 400 naming param for an array of numbers that are no token ids.
std::optional<std::vector<int32_t>> get_token_ids(const nlohmann::json& v,
                                                  const std::string& param);
// OpenAI's four prompt forms (the completions endpoint's prompt, the embeddings endpoint's
// input): a string, an array of strings, an array of token ids, an array of token id arrays, of
// at most max_items (`items` names them in the error). A 400 naming param for anything else,
// an empty array included.
std::vector<PromptInput> get_prompt_forms(const nlohmann::json& v, const std::string& param,
                                          size_t max_items, const char* items);

// Parses and validates a request body (JSON text). Throws ApiError. The server's `defaults`
// (server/request_defaults.h) stand in for the fields the body leaves out or sends as null.
CompletionRequest parse_request(Endpoint endpoint, std::string_view body,
                                const RequestDefaults& defaults = {});

// POST /tokenize: the text as llama-server sends it ("content") or vLLM ("prompt"), or chat
// messages (vLLM), to be tokenized as the completions or chat endpoint would feed it to the
// model; with_pieces (llama-server) also returns each token's text.
struct TokenizeRequest {
  std::string model;
  std::string text;
  bool chat = false;  // messages given: the chat template applies, generation prompt added
  std::vector<ChatMessage> messages;
  // vLLM's add_generation_prompt and continue_final_message, as on the chat endpoint.
  bool add_generation_prompt = true;
  std::string prefill;
  // A thinking template's switch (chat_template_kwargs.enable_thinking, Ollama's think,
  // Anthropic's thinking.type); nullopt: the template's default, which is to think.
  std::optional<bool> enable_thinking;
  bool with_pieces = false;
};
TokenizeRequest parse_tokenize(std::string_view body);

// POST /detokenize: {"tokens": [ids]}. Ids are checked against the vocabulary by the server.
struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};
DetokenizeRequest parse_detokenize(std::string_view body);

// 404 unless `requested` is empty or one of `ids` (the model's file stem and the alias "specdec").
void check_model(const std::string& requested, std::span<const std::string> ids);

// The number of tokens to generate: the request's max_tokens, or the endpoint default
// (completions: 16 as in OpenAI's API; chat: the rest of the context). 400 with the numbers
// when the prompt plus the client's max_tokens exceeds the context (the server's default limit
// is cut to the rest of the context instead), or the prompt is empty or fills it.
int32_t resolve_max_tokens(const CompletionRequest& request, int32_t prompt_tokens, int32_t n_ctx);

}  // namespace specdec::server
