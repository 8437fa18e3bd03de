// Ollama's API: POST /api/chat and /api/generate (whole or as newline-delimited JSON), POST
// /api/show, GET /api/tags, /api/ps and /api/version (server/ollama_api.h holds the shapes).
#include <chrono>
#include <functional>

#include "common/error.h"
#include "server/http_server_impl.h"

namespace specdec::server {

namespace {

using nlohmann::json;

// The Ollama API version whose shapes these endpoints follow (clients gate features on it).
constexpr const char* kOllamaApiVersion = "0.12.0";

int64_t elapsed_ns(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              since)
      .count();
}

// /api/generate's `context`: the prompt's ids and the reply's, which a next request continues.
std::vector<int32_t> conversation_ids(const std::vector<int32_t>& prompt,
                                      const GenerationResult& result) {
  std::vector<int32_t> ids = prompt;
  ids.insert(ids.end(), result.tokens.begin(), result.tokens.end());
  return ids;
}

}  // namespace

void HttpServer::Impl::check_ollama_model(const std::string& sent) const {
  const std::string name = ollama_model_name(sent);
  for (const std::string& id : model_ids) {
    if (ollama_model_name(id) == name) return;  // an id may carry ":latest" itself
  }
  // Ollama's wording and status.
  throw ApiError(404, str_cat("model \"", sent, "\" not found, try pulling it first"),
                 "not_found_error", "model", "model_not_found");
}

void HttpServer::Impl::ollama_generation(bool chat, const HttpRequest& req, HttpResponder& res) {
  const auto start = std::chrono::steady_clock::now();
  Engine& e = ready_engine();
  if (draining.load()) throw shutting_down_error();
  const OllamaRequest o = chat ? parse_ollama_chat(req.body, config.request_defaults)
                               : parse_ollama_generate(req.body, config.request_defaults);
  check_ollama_model(o.model);
  const CompletionRequest& r = o.request;
  OllamaMeta meta;
  meta.model = o.model;
  meta.chat = chat;
  if (o.think.value_or(false) && !e.chat_template().thinking()) {
    // Ollama's wording: only a model whose template reasons can be asked to.
    throw invalid_request(str_cat("\"", o.model, "\" does not support thinking"), "think",
                          "unsupported_value");
  }
  meta.reasoning = reasoning_mode(r, e);
  if (o.load_only) {
    // The model is always loaded: nothing to do but say so.
    const std::string doc = ollama_line(ollama_load_json(meta, o.unload));
    res.send(200, r.stream ? "application/x-ndjson" : "application/json", doc);
    return;
  }

  // The prompt's tokens: the turns through the template, the raw prompt, or fill in the middle;
  // an earlier response's context first.
  const Tokenizer& tok = e.tokenizer();
  std::vector<int32_t> prompt = o.context;
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] >= tok.n_vocab()) {
      throw invalid_request(str_cat("context[", i, "] = ", prompt[i],
                                    " is outside the vocabulary of ", tok.n_vocab(), " tokens"),
                            "context", "invalid_value");
    }
  }
  std::vector<int32_t> tokens;
  if (!r.suffix.empty()) {
    if (!tok.fim()) {
      throw invalid_request(
          str_cat("\"", o.model,
                  "\" does not support insert (it has no fill-in-the-middle tokens)"),
          "suffix", "unsupported_value");
    }
    tokens = encode_fim_prompt(tok, r.prompts[0].text, r.suffix);
  } else {
    const std::string text =
        r.endpoint == Endpoint::ChatCompletions ? chat_prompt_text(r, e) : r.prompts[0].text;
    // A continuation's text is not the start of a sequence: no second BOS.
    tokens = prompt.empty() ? e.tokenize_prompt(text) : tok.encode(text, false, true);
  }
  prompt.insert(prompt.end(), tokens.begin(), tokens.end());
  const auto n = static_cast<int32_t>(prompt.size());
  if (n >= e.n_ctx()) {
    throw invalid_request(
        str_cat("the prompt is ", n, " tokens, which does not fit this server's context of ",
                e.n_ctx(), " tokens (its -c; num_ctx cannot change it)"),
        chat ? "messages" : "prompt", "context_length_exceeded");
  }
  // num_predict as asked, or until the turn ends: the engine ends the reply where the context
  // does (done_reason "length"), as Ollama does without a context shift.
  const GenerationOptions opts = request_options(r, e);
  const std::vector<std::shared_ptr<Job>> jobs =
      submit_jobs({prompt}, {r.max_tokens.value_or(e.n_ctx())}, opts, r);
  for (const ToolSpec& t : r.tools.tools) meta.tool_names.push_back(t.name);
  meta.tool_id_seed = std::hash<std::string>{}(make_id(Endpoint::ChatCompletions));
  // /api/generate returns the conversation so far as token ids, unless raw.
  const bool with_context = !chat && !o.raw;

  if (r.stream) return ollama_stream(jobs[0], meta, r, prompt, with_context, start, res);
  if (!wait_all(jobs, res)) return;
  const Job& j = *jobs[0];
  if (std::optional<ApiError> err = job_error(j)) throw *err;
  const GenerationResult& result = j.result();
  // A thinking model's reasoning first; the content (and its calls) follows it.
  const ReasoningSplit split = meta.reasoning.of(result.text);
  const SplitReply reply =
      meta.tool_names.empty() ? SplitReply{split.content, {}}
                              : split_tool_calls(split.content, meta.tool_names, meta.tool_id_seed);
  const std::vector<int32_t> context =
      with_context ? conversation_ids(prompt, result) : std::vector<int32_t>{};
  json doc = ollama_done_json(meta, result, elapsed_ns(start), with_context ? &context : nullptr,
                              &reply, split.reasoning);
  if (r.logprobs >= 0) doc["logprobs"] = ollama_logprobs_json(tok, r, result.logprobs);
  res.send(200, "application/json", to_wire(doc));
}

void HttpServer::Impl::ollama_stream(const std::shared_ptr<Job>& job, const OllamaMeta& meta,
                                     const CompletionRequest& r, const std::vector<int32_t>& prompt,
                                     bool with_context, std::chrono::steady_clock::time_point start,
                                     HttpResponder& res) {
  const std::vector<std::shared_ptr<Job>> jobs = {job};
  if (!begin_event_stream(res, jobs, "application/x-ndjson")) return;
  // With logprobs, each document carries the entries of the tokens received since the last one
  // (text held back as possible tool calls takes its entries along when it goes out).
  const Tokenizer& tok = ready_engine().tokenizer();
  std::vector<TokenLogprob> entries;
  size_t entries_sent = 0;
  const auto with_logprobs = [&](json doc) {
    if (r.logprobs < 0) return doc;
    doc["logprobs"] =
        ollama_logprobs_json(tok, r, std::span<const TokenLogprob>(entries).subspan(entries_sent));
    entries_sent = entries.size();
    return doc;
  };
  const auto send = [&res](const json& doc) { return res.write(ollama_line(doc)); };
  const auto give_up = [&jobs] { cancel_jobs(jobs); };
  // With tools, what may be calls is held (streamable_content) until the end, when the calls
  // go out in one chunk.
  const bool tools = !meta.tool_names.empty();
  size_t sent = 0;
  const auto send_content = [&](std::string_view text) {
    return text.empty() || send(with_logprobs(ollama_chunk_json(meta, text)));
  };
  // A thinking model's reasoning goes out as `thinking` chunks before the content.
  const ReasoningRelay thinking{meta.reasoning.opened, [&](std::string_view t) {
                                  return send(with_logprobs(ollama_thinking_chunk_json(meta, t)));
                                }};
  const std::optional<std::string> relayed =
      relay_text(job, tools, res, send_content, sent, r.logprobs >= 0 ? &entries : nullptr,
                 meta.reasoning.split ? &thinking : nullptr);
  if (!relayed) return;
  const std::string& content = *relayed;  // what follows the reasoning
  if (const std::optional<ApiError> err = job_error(*job)) {
    if (send(ollama_error_json(*err))) res.end_stream();
    return;
  }
  const SplitReply split = tools ? split_tool_calls(content, meta.tool_names, meta.tool_id_seed)
                                 : SplitReply{content, {}};
  if (split.calls.empty()) {
    // No calls: what was held back is text after all.
    if (!send_content(std::string_view(content).substr(sent))) return give_up();
  } else if (!send(with_logprobs(ollama_tool_calls_chunk_json(meta, split.calls)))) {
    return give_up();
  }
  const GenerationResult& result = job->result();
  const std::vector<int32_t> context =
      with_context ? conversation_ids(prompt, result) : std::vector<int32_t>{};
  // Entries left (of the end token, or of text that did not go out) ride on the last document.
  json done =
      ollama_done_json(meta, result, elapsed_ns(start), with_context ? &context : nullptr, nullptr);
  if (entries_sent < entries.size()) done = with_logprobs(std::move(done));
  if (!send(done)) {
    return give_up();
  }
  res.end_stream();
}

void HttpServer::Impl::ollama_info(const HttpRequest& req, HttpResponder& res) {
  const std::string& path = req.path;
  if (path == "/api/version") {
    res.send(200, "application/json", to_wire(json{{"version", kOllamaApiVersion}}));
    return;
  }
  ready_engine();  // the facts are known once the models are loaded
  if (path == "/api/tags") {
    res.send(200, "application/json", to_wire(ollama_tags_json(facts)));
  } else if (path == "/api/ps") {
    res.send(200, "application/json", to_wire(ollama_ps_json(facts)));
  } else {  // POST /api/show
    check_ollama_model(parse_ollama_show(req.body));
    res.send(200, "application/json", to_wire(ollama_show_json(facts, config.request_defaults)));
  }
}

}  // namespace specdec::server
