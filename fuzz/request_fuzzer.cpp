// Server request fuzz target. Input: one flag byte, then the request body (JSON text).
//   bit 0     the endpoint: 0 /v1/completions, 1 /v1/chat/completions (and /completion or
//             /infill, /v1/messages or /v1/messages/count_tokens, /api/generate or /api/chat
//             for the same body, which /v1/responses also parses)
//   bits 0-1  also the embedding endpoint the body goes to: /v1/embeddings, /embedding,
//             /api/embed, /api/embeddings
//   bits 1-3  the context size resolve_max_tokens checks against (kContexts)
//   bit 4     the chat template: ChatML or Llama 3
//   bits 5-7  how the stop matcher is fed the prompt text (kChunks, bytes per push); the body is
//             fed to the reasoning splitter in pieces of the same size (bit 4: the prompt left
//             a <think> block open)
// A rejected body must come back as an ApiError with status 400 whose error JSON serializes
// and parses again. An accepted one must hold only in-range values, and then goes the way
// HttpServer::generation takes it: check_model, chat rendering, encode_prompt,
// resolve_max_tokens, the sampling distribution from its parameters, the logprobs it asks for
// and their JSON, and its stop strings on a StopMatcher, each checked against what its header
// promises.
#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/stop_matcher.h"
#include "fuzz_support.h"
#include "fuzz_targets.h"
#include "sampling/distribution.h"
#include "sampling/logprobs.h"
#include "sampling/rng.h"
#include "server/anthropic_api.h"
#include "server/embeddings_api.h"
#include "server/native_api.h"
#include "server/ollama_api.h"
#include "server/openai_format.h"
#include "server/reasoning.h"
#include "server/request_parsing.h"
#include "server/responses_api.h"
#include "tokenizer/infill_prompt.h"

namespace specdec::fuzz {
namespace {

using nlohmann::json;
using server::ApiError;
using server::CompletionRequest;
using server::Endpoint;

constexpr int32_t kContexts[] = {1,  2,    8,       16,
                                 64, 4096, 1 << 20, std::numeric_limits<int32_t>::max()};
constexpr size_t kChunks[] = {1, 2, 3, 5, 8, 13, 64, std::numeric_limits<size_t>::max()};

void check_error_document(const ApiError& e) {
  const json doc = server::error_json(e);
  const std::string wire = server::to_wire(doc);
  const json back = json::parse(wire, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(!back.is_discarded());
  FUZZ_CHECK(back["error"]["message"].is_string());
  FUZZ_CHECK(back["error"]["type"] == e.type());
}

// The distribution the request's sampling parameters give over a few logits taken from the
// prompt, and one draw from it.
void check_sampling(const CompletionRequest& r, std::string_view text) {
  std::vector<float> logits;
  for (size_t i = 0; i < text.size() && logits.size() < 64; ++i) {
    logits.push_back(static_cast<float>(static_cast<uint8_t>(text[i]) % 32) * 0.5f - 4.0f);
  }
  if (logits.empty()) logits = {0.0f, 1.0f, 1.0f};
  // The filters that keep the argmax (typical sampling and XTC may drop it), in either order.
  SamplingParams p;
  p.temperature = r.sampling.temperature;
  p.top_k = r.sampling.top_k;
  p.top_p = r.sampling.top_p;
  p.min_p = r.sampling.min_p;
  p.temperature_last = r.sampling.temperature_last;
  p.seed = r.seed.value_or(0);
  Distribution d;
  make_distribution(logits, p, d);
  FUZZ_CHECK(d.size() >= 1 && d.ids.size() == d.probs.size());
  FUZZ_CHECK(d.n_vocab == static_cast<int32_t>(logits.size()));
  if (p.greedy()) FUZZ_CHECK(d.size() == 1);
  if (p.top_k > 0) FUZZ_CHECK(d.size() <= static_cast<size_t>(p.top_k));
  double sum = 0;
  std::vector<bool> seen(logits.size());
  for (size_t i = 0; i < d.size(); ++i) {
    const int32_t id = d.ids[i];
    FUZZ_CHECK(id >= 0 && id < d.n_vocab && !seen[static_cast<size_t>(id)]);
    seen[static_cast<size_t>(id)] = true;
    FUZZ_CHECK(std::isfinite(d.probs[i]) && d.probs[i] >= 0);
    if (i > 0) FUZZ_CHECK(d.probs[i] <= d.probs[i - 1]);
    sum += d.probs[i];
  }
  FUZZ_CHECK(std::fabs(sum - 1.0) < 1e-4);
  // The argmax (lowest id among ties) survives every filter.
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  FUZZ_CHECK(d.argmax() == best);
  Rng rng(p.seed);
  const int32_t id = sample(d, rng);
  FUZZ_CHECK(d.prob(id) > 0);
}

// Feeds `text` to a StopMatcher in pushes of about `chunk` bytes (cut at character starts, as
// the engine pushes whole UTF-8 characters) and checks the released text.
void check_stop(const std::vector<std::string>& stops, std::string_view text, size_t chunk) {
  StopMatcher m(stops);
  const bool valid = is_valid_utf8(text);  // always, from JSON strings; checked to be sure
  std::string out;
  for (size_t at = 0; at < text.size() && !m.stopped();) {
    size_t n = std::min(chunk, text.size() - at);
    while (at + n < text.size() && (static_cast<uint8_t>(text[at + n]) & 0xC0) == 0x80) ++n;
    const std::string piece = m.push(text.substr(at, n));
    // Valid text in whole characters and valid stop strings never release half a character.
    if (valid) FUZZ_CHECK(is_valid_utf8(piece));
    out += piece;
    at += n;
  }
  out += m.finish();
  FUZZ_CHECK(text.starts_with(out));
  for (const std::string& s : stops) {
    if (!s.empty()) FUZZ_CHECK(out.find(s) == std::string::npos);
  }
  if (m.stopped()) {
    FUZZ_CHECK(std::find(stops.begin(), stops.end(), m.matched()) != stops.end());
    FUZZ_CHECK(text.substr(out.size()).starts_with(m.matched()));
  } else {
    FUZZ_CHECK(out == text);
  }
}

// The logprobs a request asked for, over logits derived from the prompt, for the prompt's own
// tokens standing in for generated ones; then their JSON for the endpoint.
void check_logprobs(const CompletionRequest& r, const Tokenizer& tok,
                    const std::vector<int32_t>& tokens, std::string_view text) {
  const int32_t n_vocab = tok.n_vocab();
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  for (size_t i = 0; i < logits.size(); ++i) {
    const auto b = text.empty() ? 0 : static_cast<uint8_t>(text[i % text.size()]);
    logits[i] = static_cast<float>((b * 131 + i * 7) % 61) * 0.25f - 5.0f;
  }
  std::vector<TokenLogprob> entries;
  for (size_t i = 0; i < tokens.size() && i < 32; ++i) {
    const TokenLogprob e = token_logprob(logits, tokens[i], r.logprobs);
    FUZZ_CHECK(e.token == tokens[i]);
    FUZZ_CHECK(std::isfinite(e.logprob) && e.logprob <= 1e-6f);
    FUZZ_CHECK(e.top.size() == static_cast<size_t>(std::min(r.logprobs, n_vocab)));
    double mass = 0;
    for (size_t k = 0; k < e.top.size(); ++k) {
      const auto [id, lp] = e.top[k];
      FUZZ_CHECK(id >= 0 && id < n_vocab && std::isfinite(lp) && lp <= 1e-6f);
      if (k > 0) {
        const auto [prev_id, prev_lp] = e.top[k - 1];
        FUZZ_CHECK(lp < prev_lp || (lp == prev_lp && id > prev_id));
      }
      if (id == e.token) FUZZ_CHECK(std::fabs(lp - e.logprob) <= 1e-5f);
      mass += std::exp(static_cast<double>(lp));
    }
    FUZZ_CHECK(mass <= 1.0 + 1e-4);
    entries.push_back(e);
  }
  server::ResponseMeta meta;
  meta.endpoint = r.endpoint;
  meta.logprobs = server::LogprobFormat{&tok, r.ignore_eos};
  const json doc = server::logprobs_json(meta, entries, 0);
  const json back = json::parse(server::to_wire(doc), nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(!back.is_discarded());
  size_t shown = 0;
  for (const TokenLogprob& e : entries) shown += !tok.is_eog(e.token) || r.ignore_eos;
  if (r.endpoint == Endpoint::ChatCompletions) {
    FUZZ_CHECK(back["content"].is_array() && back["content"].size() == shown);
  } else {
    FUZZ_CHECK(back["tokens"].size() == shown && back["text_offset"].size() == shown);
    for (size_t k = 1; k < shown; ++k) {
      FUZZ_CHECK(back["text_offset"][k].get<size_t>() >= back["text_offset"][k - 1].get<size_t>());
    }
  }
  // echo: the entries stand in for a prompt's (its first token has none); every prompt token is
  // listed, and the generated part appends after it.
  if (r.echo && !entries.empty()) {
    server::EchoedPrompt prompt{std::string(text), {}};
    for (const TokenLogprob& e : entries) prompt.tokens.push_back(e.token);
    json echo =
        server::echo_logprobs_json(meta, prompt, std::span<const TokenLogprob>(entries).subspan(1));
    FUZZ_CHECK(echo["tokens"].size() == entries.size() && echo["token_logprobs"][0].is_null());
    for (size_t k = 1; k < entries.size(); ++k) {
      FUZZ_CHECK(echo["text_offset"][k].get<size_t>() >= echo["text_offset"][k - 1].get<size_t>());
    }
    server::append_logprobs(echo, doc);
    FUZZ_CHECK(echo["top_logprobs"].size() == entries.size() + shown);
  }
}

// The qwen2 test vocabulary with Qwen2.5-Coder's fill-in-the-middle and repository markers.
const Tokenizer& fim_tokenizer() {
  static const Tokenizer kTok = [] {
    VocabData d = vocab_data(4);
    for (const char* t :
         {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|repo_name|>", "<|file_sep|>"}) {
      d.tokens.push_back(t);
      d.token_types.push_back(kTokenControl);
    }
    return Tokenizer::from_vocab(std::move(d));
  }();
  return kTok;
}

// The same body on llama-server's endpoints (/completion when bit 0 is clear, /infill when
// set): a 400 naming a field, or values in range; an infill request's prompt within its budget
// (the context size of bits 1-3 less a quarter, as the server reserves without n_predict),
// markers in place, or refused by an Error.
void check_native(uint8_t flags, std::string_view body) {
  const server::NativeEndpoint endpoint =
      flags & 1 ? server::NativeEndpoint::Infill : server::NativeEndpoint::Completion;
  server::NativeRequest r;
  try {
    r = server::parse_native_request(endpoint, body);
  } catch (const ApiError& e) {
    FUZZ_CHECK(e.status() == 400 && *e.what() != '\0');
    check_error_document(e);
    return;
  }
  FUZZ_CHECK(r.n_predict >= -1 && r.n_predict <= (1 << 24));
  FUZZ_CHECK(r.n_probs >= 0 && r.n_probs <= kMaxTopLogprobs);
  FUZZ_CHECK(r.n_indent >= 0 && r.t_max_predict_ms >= 0);
  FUZZ_CHECK(r.base.sampling.temperature >= 0.0f && r.base.sampling.temperature <= 2.0f);
  FUZZ_CHECK(r.base.sampling.top_k >= 0 && r.base.sampling.top_p >= 0.0f &&
             r.base.sampling.top_p <= 1.0f);
  FUZZ_CHECK(r.base.prompts.empty() && r.base.logprobs == (r.n_probs > 0 ? r.n_probs : -1));
  for (const auto& [text, bias] : r.text_bias) FUZZ_CHECK(bias >= -100.0f && bias <= 100.0f);
  if (endpoint == server::NativeEndpoint::Completion) {
    FUZZ_CHECK(!r.prompts.empty() &&
               r.prompts.size() <= static_cast<size_t>(server::kMaxChoicesPerRequest));
    for (const auto& pieces : r.prompts) {
      FUZZ_CHECK(!pieces.empty());
      for (const server::NativePromptPiece& p : pieces) FUZZ_CHECK(p.is_text || !p.ids.empty());
    }
    return;
  }
  FUZZ_CHECK(r.prompts.empty());
  const Tokenizer& tok = fim_tokenizer();
  const int32_t n_ctx = std::min(kContexts[(flags >> 1) & 7], 1 << 16);
  const auto budget = static_cast<size_t>(std::max(1, n_ctx - std::max(1, n_ctx / 4)));
  try {
    const InfillPrompt p = encode_infill_prompt(tok, r.infill, budget);
    FUZZ_CHECK(p.tokens.size() <= budget && p.tokens.back() == tok.fim()->middle);
    FUZZ_CHECK(p.prefix_cut >= 0 && p.suffix_cut >= 0 && p.chunks_cut >= 0 &&
               static_cast<size_t>(p.chunks_cut) <= r.infill.extra.size());
    for (int32_t id : p.tokens) FUZZ_CHECK(id >= 0 && id < tok.n_vocab());
  } catch (const Error&) {
    // Only when the markers and the prompt alone do not fit: without the rest it fails too.
    bool alone_fits = true;
    try {
      encode_infill_prompt(tok, InfillInput{"", "", r.infill.prompt, {}}, budget);
    } catch (const Error&) {
      alone_fits = false;
    }
    FUZZ_CHECK(!alone_fits);
  }
}

// The same body on Anthropic's /v1/messages (/v1/messages/count_tokens when bit 0 is set): a
// 400 whose Anthropic error document serializes, or a chat request in range whose turns render
// (with the prefill after them); a reply made of the rendered text goes out as a message.
void check_messages(uint8_t flags, std::string_view body) {
  const bool count_only = flags & 1;
  CompletionRequest r;
  try {
    r = server::parse_messages_request(body, count_only);
  } catch (const ApiError& e) {
    FUZZ_CHECK(e.status() == 400 && *e.what() != '\0');
    const json doc = json::parse(server::to_wire(server::anthropic_error_json(e)), nullptr, false);
    FUZZ_CHECK(doc["type"] == "error" && doc["error"]["type"] == "invalid_request_error");
    return;
  }
  FUZZ_CHECK(r.endpoint == Endpoint::ChatCompletions && !r.messages.empty());
  FUZZ_CHECK(count_only || (r.max_tokens && *r.max_tokens >= 1));
  FUZZ_CHECK(r.sampling.temperature >= 0.0f && r.sampling.temperature <= 1.0f);
  std::vector<std::string> tools;
  for (const server::ToolSpec& t : r.tools.tools) tools.push_back(t.definition);
  const ChatTemplate tpl = ChatTemplate::detect("{{ '<|im_start|>' }} <tool_call>");
  const std::string text = tpl.apply(r.messages, r.add_generation_prompt, tools) + r.prefill;
  FUZZ_CHECK(text.size() >= r.prefill.size());
  server::MessagesMeta meta{"msg_0", "m", {}, 1};
  for (const server::ToolSpec& t : r.tools.tools) meta.tool_names.push_back(t.name);
  GenerationResult result;
  result.text = text;
  const json doc = json::parse(server::to_wire(server::message_json(meta, result)), nullptr, false);
  FUZZ_CHECK(!doc.is_discarded() && doc["content"].is_array());
}

// The same body on /v1/responses: a 400 in OpenAI's shape, or a chat request in range whose
// turns render; a reply made of the rendered text goes out as a response object.
void check_responses(std::string_view body) {
  server::ResponsesRequest r;
  try {
    r = server::parse_responses_request(body);
  } catch (const ApiError& e) {
    FUZZ_CHECK(e.status() == 400 && *e.what() != '\0');
    check_error_document(e);
    return;
  }
  FUZZ_CHECK(r.chat.endpoint == Endpoint::ChatCompletions && !r.chat.messages.empty());
  FUZZ_CHECK(!r.chat.max_tokens || *r.chat.max_tokens >= 1);
  FUZZ_CHECK(r.echo.is_object() && r.echo.contains("tools"));
  std::vector<std::string> tools;
  server::ResponsesMeta meta{"resp_0", 0, "m", {}, 1, r.echo};
  for (const server::ToolSpec& t : r.chat.tools.tools) {
    tools.push_back(t.definition);
    meta.tool_names.push_back(t.name);
  }
  const ChatTemplate tpl = ChatTemplate::detect("{{ '<|im_start|>' }} <tool_call>");
  GenerationResult result;
  result.text = tpl.apply(r.chat.messages, true, tools);
  const json doc =
      json::parse(server::to_wire(server::response_json(meta, result)), nullptr, false);
  FUZZ_CHECK(!doc.is_discarded() && !doc["output"].empty());
}

// A thinking model's reply split into reasoning and content: fed in pieces of `chunk` bytes, the
// pieces add up to the whole reply's split, no content goes out before the reasoning has ended,
// and nothing is lost but the tags and the newlines that pad them.
void check_reasoning(std::string_view text, size_t chunk, bool opened) {
  const server::ReasoningSplit whole = server::split_reasoning(text, opened);
  FUZZ_CHECK(whole.reasoning.size() + whole.content.size() <= text.size());
  server::ReasoningStream stream(opened);
  server::ReasoningSplit got;
  for (size_t at = 0; at < text.size();) {
    const size_t n = std::min(chunk, text.size() - at);
    const server::ReasoningSplit p = stream.push(text.substr(at, n));
    got.reasoning += p.reasoning;
    if (!p.content.empty()) FUZZ_CHECK(got.reasoning == whole.reasoning);
    got.content += p.content;
    at += n;
  }
  const server::ReasoningSplit rest = stream.finish();
  FUZZ_CHECK(got.reasoning + rest.reasoning == whole.reasoning);
  FUZZ_CHECK(got.content + rest.content == whole.content);
  if (!opened && !text.starts_with(kThinkOpen)) FUZZ_CHECK(whole.content == text);
}

// The same body on Ollama's /api/generate (/api/chat when bit 0 is set): a 400 whose Ollama
// error document serializes, or a request in range (Ollama's defaults filled in) whose prompt
// renders; a reply made of the rendered text goes out as Ollama's final document.
void check_ollama(uint8_t flags, std::string_view body) {
  const bool chat = flags & 1;
  server::OllamaRequest o;
  try {
    o = chat ? server::parse_ollama_chat(body) : server::parse_ollama_generate(body);
  } catch (const ApiError& e) {
    FUZZ_CHECK(e.status() == 400 && *e.what() != '\0');
    const json doc = json::parse(server::to_wire(server::ollama_error_json(e)), nullptr, false);
    FUZZ_CHECK(doc.is_object() && doc.size() == 1 && doc["error"].is_string());
    return;
  }
  FUZZ_CHECK(!o.model.empty() && o.request.model == server::ollama_model_name(o.model));
  FUZZ_CHECK(!o.unload || o.load_only);
  const CompletionRequest& r = o.request;
  if (o.load_only) return;
  FUZZ_CHECK(!r.max_tokens || *r.max_tokens >= 0);
  FUZZ_CHECK(r.sampling.temperature >= 0.0f && r.sampling.top_k >= 0 && r.sampling.top_p >= 0.0f &&
             r.sampling.top_p <= 1.0f);
  std::string text;
  if (r.endpoint == Endpoint::ChatCompletions) {
    FUZZ_CHECK(!r.messages.empty() && !o.raw);
    std::vector<std::string> tools;
    for (const server::ToolSpec& t : r.tools.tools) tools.push_back(t.definition);
    const ChatTemplate tpl = ChatTemplate::detect("{{ '<|im_start|>' }} <tool_call>");
    text = tpl.apply(r.messages, r.add_generation_prompt, tools) + r.prefill;
  } else {
    FUZZ_CHECK(!chat && r.prompts.size() == 1 && (o.raw || !r.suffix.empty()));
    text = r.prompts[0].text + r.suffix;
  }
  for (int32_t id : o.context) FUZZ_CHECK(id >= 0);
  server::OllamaMeta meta{o.model, chat, {}, 1};
  for (const server::ToolSpec& t : r.tools.tools) meta.tool_names.push_back(t.name);
  GenerationResult result;
  result.text = text;
  const server::SplitReply reply = meta.tool_names.empty()
                                       ? server::SplitReply{text, {}}
                                       : server::split_tool_calls(text, meta.tool_names, 1);
  const json doc = json::parse(
      server::ollama_line(server::ollama_done_json(meta, result, 0, &o.context, &reply)), nullptr,
      false);
  FUZZ_CHECK(!doc.is_discarded() && doc["done"] == true);
}

// The same body on the embedding endpoints (OpenAI's, llama-server's, Ollama's two; bits 0-1
// pick one): a 400 whose error document serializes, or a request in range whose response, made
// of a vector per input, serializes in that client's shape.
void check_embeddings(uint8_t flags, std::string_view body) {
  const auto api = static_cast<server::EmbeddingApi>(flags & 3);
  server::EmbeddingRequest r;
  try {
    r = server::parse_embedding_request(api, body);
  } catch (const ApiError& e) {
    FUZZ_CHECK(e.status() == 400 && *e.what() != '\0');
    check_error_document(e);
    return;
  }
  FUZZ_CHECK(r.api == api && r.inputs.size() <= server::kMaxEmbeddingInputs);
  const bool ollama = server::is_ollama(api);
  FUZZ_CHECK(ollama ? !r.model.empty() : !r.inputs.empty());
  FUZZ_CHECK(r.normalize >= -1);
  FUZZ_CHECK(!r.dimensions || *r.dimensions >= 1);
  std::vector<std::vector<std::vector<float>>> vectors;
  for (const server::PromptInput& in : r.inputs) {
    FUZZ_CHECK(ollama ? !in.tokens : (in.tokens ? !in.tokens->empty() : !in.text.empty()));
    if (in.tokens) {
      for (int32_t id : *in.tokens) FUZZ_CHECK(id >= 0);
    }
    std::vector<float> v = {0.5f, -1.0f, static_cast<float>(in.text.size())};
    if (r.dimensions) server::shorten_embedding(v, *r.dimensions, r.normalize);
    vectors.push_back({std::move(v)});
  }
  const json doc =
      json::parse(server::to_wire(server::embeddings_json(r, "m", vectors, 3, 1.0)), nullptr,
                  /*allow_exceptions=*/false);
  FUZZ_CHECK(!doc.is_discarded());
}

}  // namespace

int fuzz_one_request(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const uint8_t flags = in.byte();
  const Endpoint endpoint = flags & 1 ? Endpoint::ChatCompletions : Endpoint::Completions;
  const int32_t n_ctx = kContexts[(flags >> 1) & 7];
  const std::string_view body = in.rest();
  check_native(flags, body);
  check_messages(flags, body);
  check_responses(body);
  check_ollama(flags, body);
  check_embeddings(flags, body);
  check_reasoning(body, kChunks[flags >> 5], flags & 16);

  CompletionRequest r;
  try {
    r = server::parse_request(endpoint, body);
  } catch (const ApiError& e) {
    FUZZ_CHECK(e.status() == 400);
    FUZZ_CHECK(e.type() == "invalid_request_error" && *e.what() != '\0');
    check_error_document(e);
    return 0;
  }

  // Everything that reaches the engine is in range.
  FUZZ_CHECK(r.endpoint == endpoint);
  if (endpoint == Endpoint::Completions) {
    FUZZ_CHECK(r.messages.empty() && !r.prompts.empty());
    FUZZ_CHECK(r.prompts.size() * static_cast<size_t>(r.n) <=
               static_cast<size_t>(server::kMaxChoicesPerRequest));
    for (const server::PromptInput& p : r.prompts) {
      if (!p.tokens) continue;
      FUZZ_CHECK(!p.tokens->empty() && p.text.empty());
      for (int32_t id : *p.tokens) FUZZ_CHECK(id >= 0);
    }
  } else {
    FUZZ_CHECK(!r.messages.empty() && r.prompts.empty() && !r.echo);
    for (const ChatMessage& m : r.messages) {
      FUZZ_CHECK(m.role == "system" || m.role == "user" || m.role == "assistant" ||
                 m.role == "tool");
      FUZZ_CHECK(m.tool_calls.empty() || m.role == "assistant");
    }
  }
  FUZZ_CHECK(!r.max_tokens || (*r.max_tokens >= (r.echo ? 0 : 1) && *r.max_tokens <= (1 << 24)));
  FUZZ_CHECK(r.sampling.temperature >= 0.0f && r.sampling.temperature <= 2.0f);
  FUZZ_CHECK(r.sampling.top_p >= 0.0f && r.sampling.top_p <= 1.0f);
  FUZZ_CHECK(r.sampling.top_k >= 0 && r.sampling.top_k <= (1 << 24));
  FUZZ_CHECK(r.sampling.min_p >= 0.0f && r.sampling.min_p <= 1.0f);
  FUZZ_CHECK(r.stop.size() <= server::kMaxStopStrings);
  for (const std::string& s : r.stop) FUZZ_CHECK(!s.empty());
  FUZZ_CHECK(!r.draft_max || (*r.draft_max >= 1 && *r.draft_max <= server::kMaxDraftMax));
  FUZZ_CHECK(r.logprobs >= -1 && r.logprobs <= kMaxTopLogprobs);
  FUZZ_CHECK(r.prompt_logprobs >= -1 && r.prompt_logprobs <= kMaxTopLogprobs);
  FUZZ_CHECK(r.prompt_logprobs < 0 || !r.stream);
  FUZZ_CHECK(r.stop_token_ids.size() <= server::kMaxStopTokenIds);
  for (int32_t id : r.stop_token_ids) FUZZ_CHECK(id >= 0);
  FUZZ_CHECK(r.min_tokens >= 0 && (!r.max_tokens || r.min_tokens <= *r.max_tokens));

  const std::string ids[] = {"tiny-model", "specdec"};
  try {
    server::check_model(r.model, ids);
    FUZZ_CHECK(r.model.empty() || r.model == ids[0] || r.model == ids[1]);
  } catch (const ApiError& e) {
    FUZZ_CHECK(e.status() == 404 && !r.model.empty() && r.model != ids[0] && r.model != ids[1]);
    check_error_document(e);
  }

  // Tools, and turns with calls, render as the server renders them: on a template with
  // Qwen2.5's tool-calling convention.
  std::vector<std::string> tools;
  for (const server::ToolSpec& t : r.tools.tools) tools.push_back(t.definition);
  const bool tool_turns =
      !tools.empty() || std::any_of(r.messages.begin(), r.messages.end(),
                                    [](const auto& m) { return !m.tool_calls.empty(); });
  const ChatTemplate tpl =
      tool_turns ? ChatTemplate::detect("{{ '<|im_start|>' }} <tool_call>")
                 : ChatTemplate::of(flags & 16 ? ChatFormat::Llama3 : ChatFormat::ChatML);
  FUZZ_CHECK(!tool_turns || tpl.supports_tools());
  // A forced call's grammar is the request's; tool_choice auto's is lazy, and yields to a
  // structured output format.
  FUZZ_CHECK(r.tools.grammar == nullptr || r.grammar == r.tools.grammar ||
             (r.tools.lazy && r.grammar_trigger.empty() && r.grammar != nullptr));
  FUZZ_CHECK(r.grammar_trigger.empty() || (r.tools.lazy && r.grammar == r.tools.grammar));
  const std::string text =
      endpoint == Endpoint::Completions ? r.prompts[0].text : tpl.apply(r.messages, true, tools);
  const Tokenizer& tok = vocab_tokenizer(flags & 16 ? 3 : 4);  // llama3 / qwen2 pre-tokenizers
  const std::vector<int32_t> prompt = encode_prompt(tok, text);
  for (int32_t id : prompt) FUZZ_CHECK(id >= 0 && id < tok.n_vocab());
  const auto n_prompt = static_cast<int32_t>(prompt.size());

  try {
    const int32_t n = server::resolve_max_tokens(r, n_prompt, n_ctx);
    FUZZ_CHECK(n >= (r.echo ? 0 : 1) && int64_t{n_prompt} + n <= n_ctx);
    if (r.max_tokens) FUZZ_CHECK(n == *r.max_tokens);
  } catch (const ApiError& e) {
    FUZZ_CHECK(e.status() == 400);
    FUZZ_CHECK(n_prompt <= 0 || n_prompt >= n_ctx ||
               (r.max_tokens && int64_t{n_prompt} + *r.max_tokens > n_ctx));
    check_error_document(e);
  }

  check_sampling(r, text);
  if (r.logprobs >= 0) check_logprobs(r, tok, prompt, text);
  check_stop(r.stop, text, kChunks[flags >> 5]);

  // The streamed response carrying that text serializes to one server-sent event.
  server::ResponseMeta meta;
  meta.endpoint = endpoint;
  meta.model = r.model;
  const std::string event = server::sse_event(server::text_chunk_json(meta, text, true));
  FUZZ_CHECK(event.starts_with("data: {") && event.ends_with("}\n\n"));
  return 0;
}

}  // namespace specdec::fuzz
