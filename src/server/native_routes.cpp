// llama-server's /completion (and /completions) and /infill, and its introspection endpoints
// /props, /slots and /apply-template (server/native_api.h).
#include <algorithm>
#include <random>

#include "common/error.h"
#include "server/http_server_impl.h"
#include "server/legacy_functions.h"

namespace specdec::server {

using nlohmann::json;
using std::chrono::milliseconds;

void HttpServer::Impl::native(NativeEndpoint endpoint, const HttpRequest& req, HttpResponder& res) {
  Engine& e = ready_engine();
  if (draining.load()) throw shutting_down_error();
  NativeRequest r = parse_native_request(endpoint, req.body, config.request_defaults);
  check_model(r.base.model, model_ids);
  const Tokenizer& tok = e.tokenizer();
  const int32_t n_ctx = e.n_ctx();
  const int32_t n_vocab = tok.n_vocab();
  std::vector<std::vector<int32_t>> prompts;
  if (endpoint == NativeEndpoint::Infill) {
    if (!tok.fim()) {
      throw invalid_request(
          "infill needs a model with fill-in-the-middle tokens, and this one has none",
          "input_prefix", "unsupported_value");
    }
    // The room the generation gets: n_predict, or a quarter of the context without one.
    const int32_t reserve = r.n_predict >= 0 ? std::max(r.n_predict, 1) : std::max(1, n_ctx / 4);
    if (reserve >= n_ctx) {
      throw invalid_request(str_cat("n_predict ", r.n_predict, " leaves no room for a prompt in ",
                                    "the context of ", n_ctx, " tokens"),
                            "n_predict", "context_length_exceeded");
    }
    try {
      prompts.push_back(
          encode_infill_prompt(tok, r.infill, static_cast<size_t>(n_ctx - reserve)).tokens);
    } catch (const Error& err) {
      throw invalid_request(err.what(), "prompt", "context_length_exceeded");
    }
  } else {
    for (size_t p = 0; p < r.prompts.size(); ++p) {
      std::vector<int32_t> ids;
      for (size_t k = 0; k < r.prompts[p].size(); ++k) {
        const NativePromptPiece& piece = r.prompts[p][k];
        if (piece.is_text) {
          // Text opening a prompt gets the BOS the vocabulary wants, as llama-server adds it.
          const std::vector<int32_t> t =
              k == 0 ? e.tokenize_prompt(piece.text) : tok.encode(piece.text, false, true);
          ids.insert(ids.end(), t.begin(), t.end());
          continue;
        }
        for (int32_t id : piece.ids) {
          if (id >= n_vocab) {
            throw invalid_request(str_cat("prompt token id ", id, " is outside the vocabulary of ",
                                          n_vocab, " tokens"),
                                  "prompt", "invalid_value");
          }
        }
        ids.insert(ids.end(), piece.ids.begin(), piece.ids.end());
      }
      prompts.push_back(std::move(ids));
    }
  }
  // n_predict past the context ends the text where the context does (truncated), as there.
  std::vector<int32_t> max_tokens;
  for (const std::vector<int32_t>& p : prompts) {
    const auto n = static_cast<int32_t>(p.size());
    if (n == 0) throw invalid_request("the prompt is empty", "prompt", "invalid_value");
    if (n >= n_ctx) {
      throw invalid_request(
          str_cat("the prompt has ", n, " tokens but the context holds ", n_ctx, " tokens"),
          "prompt", "context_length_exceeded");
    }
    // -1: the engine's own bound, the context (its finish then says so).
    max_tokens.push_back(r.n_predict < 0 || r.n_predict > n_ctx - n ? -1 : r.n_predict);
  }
  for (const auto& [text, bias] : r.text_bias) {
    for (int32_t id : tok.encode(text, false, false))
      r.base.penalties.logit_bias.emplace_back(id, bias);
  }
  GenerationOptions o = request_options(r.base, e);
  o.min_indent = r.n_indent;
  o.post_sampling_probs = r.post_sampling_probs;
  o.newline_time_limit_ms = r.t_max_predict_ms;
  const std::vector<std::shared_ptr<Job>> jobs = submit_jobs(prompts, max_tokens, o, r.base);

  NativeMeta meta;
  meta.model = r.base.model.empty() ? config.model_id : r.base.model;
  meta.tokenizer = &tok;
  meta.generation_settings = native_settings_json(r, o, n_ctx);
  meta.post_sampling_probs = r.post_sampling_probs;
  // Whether a draft will propose: asked for, and a draft model loaded.
  meta.generation_settings["speculative"] = drafts(o, e);
  const auto per_prompt = static_cast<size_t>(r.base.n);
  if (r.base.stream) return native_stream(jobs, prompts, per_prompt, meta, r, res);
  if (!wait_all(jobs, res)) return;
  nlohmann::json docs = nlohmann::json::array();
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = *jobs[i];
    if (std::optional<ApiError> err = job_error(j)) throw *err;
    docs.push_back(
        select_response_fields(native_result_json(meta, j.result(), prompts[i / per_prompt], i,
                                                  r.return_tokens, r.n_probs, false, j.slot()),
                               r.response_fields));
  }
  // One prompt and one completion: the object itself; otherwise the array, as llama-server.
  res.send(200, "application/json", to_wire(docs.size() == 1 ? docs[0] : docs));
}

void HttpServer::Impl::native_stream(const std::vector<std::shared_ptr<Job>>& jobs,
                                     const std::vector<std::vector<int32_t>>& prompts,
                                     size_t per_prompt, const NativeMeta& meta,
                                     const NativeRequest& r, HttpResponder& res) {
  if (!begin_event_stream(res, jobs)) return;
  std::vector<bool> ended(jobs.size(), false);
  size_t open = jobs.size();
  std::vector<TokenLogprob> logprobs;
  const milliseconds poll = jobs.size() == 1 ? kPollInterval : milliseconds(5);
  while (open > 0) {
    bool any_text = false;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (ended[i]) continue;
      std::string text;
      logprobs.clear();
      const bool done = jobs[i]->wait(text, poll, r.n_probs > 0 ? &logprobs : nullptr);
      bool ok = true;
      if (!text.empty()) {
        any_text = true;
        const nlohmann::json probs =
            r.n_probs > 0 ? native_probs_json(*meta.tokenizer, logprobs, meta.post_sampling_probs)
                          : nlohmann::json();
        ok = res.write(sse_event(native_chunk_json(text, i, probs, jobs[i]->slot())));
      }
      if (ok && done) {
        const Job& j = *jobs[i];
        if (std::optional<ApiError> err = job_error(j)) {
          ok = res.write(sse_event(error_json(*err)));
        } else {
          ok = res.write(sse_event(native_result_json(meta, j.result(), prompts[i / per_prompt], i,
                                                      r.return_tokens, r.n_probs, true, j.slot())));
        }
        ended[i] = true;
        --open;
      }
      if (!ok) {
        cancel_jobs(jobs);
        return;
      }
    }
    if (!any_text && open > 0 && res.peer_closed()) {
      cancel_jobs(jobs);
      res.close_after();
      return;
    }
  }
  res.end_stream();  // llama-server's own stream ends without a [DONE] line
}

// GET /props and GET /slots (req.path says which): what the server runs and with which defaults,
// and what each slot is doing (server/native_api.h: props_json, slots_json).
void HttpServer::Impl::props(const HttpRequest& req, HttpResponder& res) {
  Engine& e = ready_engine();
  // The settings of a request that sets nothing, as /completion would take them (the server's
  // defaults included); without a default seed the seed is drawn per request, which
  // llama-server writes as 4294967295 (LLAMA_DEFAULT_SEED).
  const NativeRequest none = parse_native_request(NativeEndpoint::Completion, R"({"prompt": ""})",
                                                  config.request_defaults);
  const GenerationOptions o = request_options(none.base, e);
  ServerProps p;
  p.model = &facts;
  p.alias = config.model_id;
  p.settings = native_settings_json(none, o, e.n_ctx());
  const nlohmann::json* seed = config.request_defaults.find("seed");
  p.settings["seed"] = seed != nullptr ? *seed : nlohmann::json(4294967295u);
  p.speculative = drafts(o, e);
  p.settings["speculative"] = p.speculative;
  p.n_slots = e.n_slots();
  const Tokenizer& tok = e.tokenizer();
  const auto text_of = [&tok](int32_t id) {
    return id >= 0 && id < tok.n_vocab() ? tok.token_text(id) : std::string();
  };
  p.bos_token = text_of(tok.bos());
  p.eos_token = text_of(tok.eos());
  if (req.path == "/props") {
    res.send(200, "application/json", to_wire(props_json(p)));
    return;
  }
  const std::vector<GenerationQueue::SlotState> states = queue->slot_states();
  // ?fail_on_no_slot=1: a 503 when every slot is busy (load balancers probe with it).
  if (query_value(req.target, "fail_on_no_slot") == "1" &&
      std::all_of(states.begin(), states.end(), [](const auto& s) { return s.processing; })) {
    throw ApiError(503, "no slot available", "unavailable_error", "", "no_slot_available");
  }
  res.send(200, "application/json", to_wire(slots_json(p, states)));
}

void HttpServer::Impl::apply_template(const HttpRequest& req, HttpResponder& res) {
  Engine& e = ready_engine();
  // The body of a chat request: its turns, tools and chat_template_kwargs rendered as
  // /v1/chat/completions renders them, without generating.
  bool legacy_functions = false;
  const CompletionRequest r =
      parse_chat_request(req.body, legacy_functions, config.request_defaults);
  check_model(r.model, model_ids);
  res.send(200, "application/json", to_wire(json{{"prompt", chat_prompt_text(r, e)}}));
}

}  // namespace specdec::server
