// Ollama's API (POST /api/chat and /api/generate, GET /api/tags, /api/ps, /api/version, POST
// /api/show), the API Ollama's own clients, Open WebUI, editor plugins and the `ollama` SDKs
// speak, over the same engine as the OpenAI endpoints.
//
// A request is translated into the chat or completions request it means and validated by the
// same rules, with errors naming Ollama's fields (options.temperature, format, ...) and sent in
// Ollama's shape ({"error": "..."}). Ollama's defaults apply where its clients rely on them:
// stream true, temperature 0.8, top_k 40, top_p 0.9, and generation until the end of the turn
// or of the context. Responses are Ollama's objects, streamed as newline-delimited JSON.
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
#include "server/model_facts.h"
#include "server/reasoning.h"
#include "server/request_parsing.h"
#include "server/tool_calls.h"

namespace specdec::server {

// An /api/chat or /api/generate request, translated.
struct OllamaRequest {
  // The chat form (/api/chat; /api/generate through the template) or the completions form
  // (/api/generate with raw, or with a suffix: fill in the middle). max_tokens: the request's
  // num_predict when positive; nullopt: until the turn or the context ends.
  CompletionRequest request;  // its model: the name without ":latest"
  std::string model;          // the name as the client sent it, which responses repeat
  // /api/generate's deprecated conversation memory: the token ids an earlier response returned
  // as `context`, which this prompt continues.
  std::vector<int32_t> context;
  bool raw = false;  // /api/generate: the prompt as it is, no template, no context returned
  // Nothing to generate (no messages; an empty prompt and no suffix): Ollama loads the model (or,
  // with keep_alive 0, unloads it) and answers at once with done_reason "load" or "unload".
  bool load_only = false;
  bool unload = false;
  // think: nullopt (not sent), or whether to reason (an effort level such as "high" is true);
  // the route refuses true for a model whose template does not think.
  std::optional<bool> think;
};

// Parse and validate a body; throw ApiError naming Ollama's fields. A model name may carry
// Ollama's ":latest" tag (see ollama_model_name). The server's `defaults` stand in for the
// options the body leaves out, before Ollama's own (temperature 0.8, top-k 40, top-p 0.9, repeat
// penalty 1.1 over 64 tokens); max_tokens stands for num_predict.
OllamaRequest parse_ollama_chat(std::string_view body, const RequestDefaults& defaults = {});
OllamaRequest parse_ollama_generate(std::string_view body, const RequestDefaults& defaults = {});

// The name a client sent without Ollama's default tag ("x:latest" -> "x"), so that names this
// server lists under /api/tags and names without a tag both select its model.
std::string ollama_model_name(std::string_view name);

// /api/show's body: {"model": name} (or the older {"name": name}). Returns the name as given.
std::string parse_ollama_show(std::string_view body);

// Ollama's error body: {"error": "<message>"}.
nlohmann::json ollama_error_json(const ApiError& error);

nlohmann::json ollama_tags_json(const ModelFacts& facts);
// /api/show: `parameters` are the sampling defaults a request gets (the server's, else Ollama's).
nlohmann::json ollama_show_json(const ModelFacts& facts, const RequestDefaults& defaults = {});
nlohmann::json ollama_ps_json(const ModelFacts& facts);

// What every document of one response shares.
struct OllamaMeta {
  std::string model;                    // as the request named it
  bool chat = true;                     // /api/chat's shape, else /api/generate's
  std::vector<std::string> tool_names;  // empty: the reply is text only
  uint64_t tool_id_seed = 0;
  // A thinking model's replies: a leading <think> block goes out as `thinking`
  // (server/reasoning.h).
  ReasoningMode reasoning = {};
};

// The time now as Ollama writes created_at: RFC 3339 in UTC with nanoseconds.
std::string ollama_time_now();

// A chunk of text (done false): {"model", "created_at", "message": {"role": "assistant",
// "content"}} on /api/chat, {"model", "created_at", "response"} on /api/generate.
nlohmann::json ollama_chunk_json(const OllamaMeta& meta, std::string_view text);
// A chunk of a thinking model's reasoning: message.thinking (/api/chat) or thinking
// (/api/generate), the text empty.
nlohmann::json ollama_thinking_chunk_json(const OllamaMeta& meta, std::string_view thinking);
// A chunk carrying the reply's tool calls (/api/chat): arguments as JSON objects.
nlohmann::json ollama_tool_calls_chunk_json(const OllamaMeta& meta,
                                            const std::vector<ToolCall>& calls);

// "stop" (the end of the turn, a stop string, tool calls) or "length" (num_predict, or the
// context's end).
const char* ollama_done_reason(const GenerationResult& result);

// The last document: done true, done_reason, and Ollama's counts and durations (nanoseconds):
// total_duration (the request's wall time, `total_ns`), load_duration 0 (the model is resident),
// prompt_eval_count (the prompt's tokens), prompt_eval_duration, eval_count, eval_duration.
// `context` (/api/generate without raw): the ids the next request may send back. With
// `reply`, the message or response holds it (a whole, unstreamed response); otherwise it is
// empty, as Ollama's final chunk is; `thinking` (a whole response's reasoning) goes beside it.
nlohmann::json ollama_done_json(const OllamaMeta& meta, const GenerationResult& result,
                                int64_t total_ns, const std::vector<int32_t>* context,
                                const SplitReply* reply, std::string_view thinking = {});

// The immediate answer to a request with nothing to generate.
nlohmann::json ollama_load_json(const OllamaMeta& meta, bool unload);

// The tokens' logprobs as Ollama's `logprobs` field: [{"token", "logprob", "bytes",
// "top_logprobs": [{"token", "logprob", "bytes"}]}], the chat endpoint's entries (the target's
// distribution at temperature 1, unfiltered; the end token left out unless ignore_eos).
nlohmann::json ollama_logprobs_json(const Tokenizer& tok, const CompletionRequest& r,
                                    std::span<const TokenLogprob> entries);

// One document of a stream: its JSON and a newline (invalid UTF-8 replaced).
std::string ollama_line(const nlohmann::json& doc);

}  // namespace specdec::server
