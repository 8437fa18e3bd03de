// llama-server's own endpoints, for the clients written against it: POST /completion (also
// /completions) and POST /infill, the code-infill endpoint editor plugins (llama.vscode,
// llama.vim) call. Requests take llama-server's field names and defaults, responses its shape
// (content, stop, stop_type, timings, completion_probabilities...). Each field is either
// honoured, ignored because it changes nothing here (cache_prompt: prefixes are always reused,
// bit for bit), or refused with a 400 naming it (a sampler specdec does not implement, switched
// on); docs/serving.md lists which.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "server/generation_queue.h"
#include "server/model_facts.h"
#include "server/request_parsing.h"
#include "tokenizer/infill_prompt.h"

namespace specdec::server {

enum class NativeEndpoint { Completion, Infill };

// One piece of a prompt: text (tokenized by the server) or token ids.
struct NativePromptPiece {
  bool is_text = true;
  std::string text;
  std::vector<int32_t> ids;
};

struct NativeRequest {
  NativeEndpoint endpoint = NativeEndpoint::Completion;
  // The fields llama-server shares with the OpenAI-style endpoints (sampling, stop, grammar,
  // json_schema, penalties, seed, stream, n as n_cmpl...), with llama-server's defaults
  // (temperature 0.8, top_k 40, top_p 0.95, min_p 0.05) and its `samplers` list applied: a
  // filter left out of the list is off.
  CompletionRequest base;
  // /completion: each prompt as pieces (a string; token ids; or ids and strings mixed).
  std::vector<std::vector<NativePromptPiece>> prompts;
  InfillInput infill;      // /infill: input_prefix, input_suffix, input_extra, prompt
  int32_t n_predict = -1;  // -1: until the end of generation or a full context
  int32_t n_probs = 0;     // alternatives per token in completion_probabilities; 0: none
  // completion_probabilities from the distribution each token was sampled from (probabilities
  // after the sampling chain) instead of the target's own log-probabilities.
  bool post_sampling_probs = false;
  int32_t n_indent = 0;         // GenerationOptions::min_indent
  double t_max_predict_ms = 0;  // GenerationOptions::newline_time_limit_ms
  bool return_tokens = false;
  std::vector<std::string> response_fields;  // empty: the whole response
  // logit_bias entries that name text: each of its tokens gets the bias (resolved by the server,
  // which has the tokenizer).
  std::vector<std::pair<std::string, float>> text_bias;
};

// Parses and validates a request body. Throws ApiError (400 naming the field). The server's
// `defaults` (server/request_defaults.h) stand in for what the body leaves out, before
// llama-server's own defaults (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, the
// temperature last); max_tokens stands for n_predict.
NativeRequest parse_native_request(NativeEndpoint endpoint, std::string_view body,
                                   const RequestDefaults& defaults = {});

// What the responses of one request share.
struct NativeMeta {
  std::string model;
  const Tokenizer* tokenizer = nullptr;
  nlohmann::json generation_settings;
  bool post_sampling_probs = false;  // NativeRequest::post_sampling_probs
};

// The settings a generation runs with, in llama-server's names (sampling, penalties, stop,
// speculation, each adapter's LoRA scale); native_settings_json adds a /completion request's own.
nlohmann::json options_settings_json(const GenerationOptions& o, int32_t n_ctx);
// The settings a response reports back (llama-server's generation_settings).
nlohmann::json native_settings_json(const NativeRequest& r, const GenerationOptions& o,
                                    int32_t n_ctx);

// llama-server's stop_type: "eos", "word" (a stop string), or "limit" (n_predict, a full
// context, n_indent, t_max_predict_ms).
const char* native_stop_type(const GenerationResult& result);

// completion_probabilities entries: {id, token, bytes, logprob, top_logprobs: [...]}, or with
// post_sampling {id, token, bytes, prob, top_probs: [...]} (the entries' exp).
nlohmann::json native_probs_json(const Tokenizer& tok, std::span<const TokenLogprob> entries,
                                 bool post_sampling = false);

// A finished generation: the whole response (content and all), or, streamed, the last event
// (content "", the text having gone out in the chunks before it). `slot`: the slot it ran on
// (id_slot; -1 when unknown).
nlohmann::json native_result_json(const NativeMeta& meta, const GenerationResult& result,
                                  const std::vector<int32_t>& prompt, size_t index,
                                  bool return_tokens, int32_t n_probs, bool streamed,
                                  int32_t slot = -1);
// A streamed piece of text.
nlohmann::json native_chunk_json(std::string_view text, size_t index, const nlohmann::json& probs,
                                 int32_t slot = -1);

// response_fields: only these fields, a "a/b" path lifted to the top level as "b"; missing ones
// are left out.
nlohmann::json select_response_fields(const nlohmann::json& doc,
                                      const std::vector<std::string>& fields);

// What llama-server's GET /props and GET /slots say about this server.
struct ServerProps {
  const ModelFacts* model = nullptr;  // the served model (model_facts.h)
  std::string alias;                  // the model id
  nlohmann::json settings;            // native_settings_json of a request that sets nothing
  int32_t n_slots = 1;
  bool speculative = false;  // a draft model is loaded
  std::string bos_token, eos_token;
};

// GET /props: default_generation_settings (a slot's shape: n_ctx, speculative, params), total
// slots, model alias and path, the GGUF's chat template and what it can do, modalities (none
// but text), the endpoints served (POST /props is not: settings are set per request).
nlohmann::json props_json(const ServerProps& props);

// GET /slots: one entry per slot (id, id_task, n_ctx, speculative, is_processing, params: a busy
// slot's request's settings and n_predict, an idle one's the defaults; a busy slot's
// n_prompt_tokens and next_token: [{has_next_token, n_remain, n_decoded}], its tokens so far).
nlohmann::json slots_json(const ServerProps& props,
                          std::span<const GenerationQueue::SlotState> states);

}  // namespace specdec::server
