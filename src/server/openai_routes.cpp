// /v1/completions and /v1/chat/completions: OpenAI's request and response shapes, whole or
// streamed.
#include <random>

#include "common/error.h"
#include "server/best_of.h"
#include "server/http_server_impl.h"
#include "server/legacy_functions.h"

namespace specdec::server {

using nlohmann::json;
using std::chrono::milliseconds;

void HttpServer::Impl::generation(Endpoint endpoint, const HttpRequest& req, HttpResponder& res) {
  Engine& e = ready_engine();
  if (draining.load()) throw shutting_down_error();
  bool legacy_functions = false;  // the deprecated function-calling form's reply
  const CompletionRequest r =
      endpoint == Endpoint::ChatCompletions
          ? parse_chat_request(req.body, legacy_functions, config.request_defaults)
          : parse_request(endpoint, req.body, config.request_defaults);
  check_model(r.model, model_ids);
  // The prompts' tokens: text as the server tokenizes prompts, token ids as given (checked
  // against the vocabulary); a chat request has one, its messages through the template.
  std::vector<EchoedPrompt> prompts;
  if (!r.suffix.empty() && !e.tokenizer().fim()) {
    throw invalid_request(
        "'suffix' needs a model with fill-in-the-middle tokens, and this one "
        "has none",
        "suffix", "unsupported_value");
  }
  if (endpoint == Endpoint::Completions) {
    const int32_t n_vocab = e.tokenizer().n_vocab();
    for (size_t p = 0; p < r.prompts.size(); ++p) {
      const PromptInput& in = r.prompts[p];
      if (!r.suffix.empty()) {
        prompts.push_back({in.text, encode_fim_prompt(e.tokenizer(), in.text, r.suffix)});
        continue;
      }
      if (!in.tokens) {
        prompts.push_back({in.text, e.tokenize_prompt(in.text)});
        continue;
      }
      for (int32_t id : *in.tokens) {
        if (id >= n_vocab) {
          throw invalid_request(
              str_cat("prompt token id ", id, " is outside the vocabulary of ", n_vocab, " tokens"),
              r.prompts.size() == 1 ? "prompt" : str_cat("prompt[", p, "]"), "invalid_value");
        }
      }
      prompts.push_back({e.tokenizer().decode(*in.tokens), *in.tokens});
    }
  } else {
    prompts.push_back({"", e.tokenize_prompt(chat_prompt_text(r, e))});
  }
  std::vector<int32_t> max_tokens;
  for (const EchoedPrompt& p : prompts) {
    max_tokens.push_back(resolve_max_tokens(r, static_cast<int32_t>(p.tokens.size()), e.n_ctx()));
  }
  GenerationOptions o = request_options(r, e);
  // best_of > n: each sequence scored by its tokens' log-probabilities (server/best_of.h).
  const bool choosing = r.best_of > r.n;
  if (choosing) o.logprobs = std::max(o.logprobs, 0);

  std::vector<std::vector<int32_t>> prompt_tokens;
  for (const EchoedPrompt& p : prompts) prompt_tokens.push_back(p.tokens);
  const std::vector<std::shared_ptr<Job>> jobs =
      submit_jobs(prompt_tokens, max_tokens, o, r, r.best_of);
  std::vector<EchoedPrompt> echoes;
  if (r.echo) {
    for (const EchoedPrompt& p : prompts) echoes.insert(echoes.end(), static_cast<size_t>(r.n), p);
  }
  ResponseMeta meta;
  meta.endpoint = endpoint;
  meta.id = make_id(endpoint);
  meta.created = unix_now();
  meta.model = r.model.empty() ? config.model_id : r.model;
  for (const ToolSpec& t : r.tools.tools) meta.tool_names.push_back(t.name);
  meta.legacy_functions = legacy_functions;
  meta.reasoning = reasoning_mode(r, e);
  // deepseek-legacy: the reasoning apart and the whole reply as the content (only here: the
  // other APIs have a field of their own for the reasoning).
  meta.reasoning.whole_content =
      meta.reasoning.split && r.reasoning_format == ReasoningFormat::DeepseekLegacy;
  if (r.logprobs >= 0) {
    meta.logprobs = LogprobFormat{&e.tokenizer(), r.ignore_eos, r.tokens_as_ids, r.logprobs};
  }
  const auto per_prompt = static_cast<size_t>(r.n);
  if (r.stream) return stream(jobs, meta, echoes, per_prompt, r.include_usage, res);

  if (!wait_all(jobs, res)) return;
  std::vector<GenerationResult> results;
  std::vector<std::string> reasoning;  // a thinking model's, per choice
  for (const auto& job : jobs) {
    if (std::optional<ApiError> err = job_error(*job)) throw *err;
    results.push_back(job->result());
    if (meta.reasoning.split) {
      // The reply's content (and its calls) is what follows the reasoning.
      ReasoningSplit split = meta.reasoning.of(results.back().text);
      results.back().text = std::move(split.content);
      reasoning.push_back(std::move(split.reasoning));
    }
  }
  std::vector<GenerationResult> sequences;  // all of them, with best_of > n
  if (choosing) {
    sequences = std::move(results);
    results.clear();
    for (size_t i : best_of_choices(sequences, static_cast<size_t>(r.best_of), per_prompt)) {
      results.push_back(sequences[i]);
    }
  }
  nlohmann::json doc = completion_json(meta, results, echoes, per_prompt);
  if (choosing) {
    // Usage counts every sequence generated, as OpenAI bills best_of.
    const GenerationStats all = combined_stats(sequences, static_cast<size_t>(r.best_of));
    doc["usage"] = usage_json(all);
    doc["specdec"] = specdec_stats_json(all);
  }
  for (size_t i = 0; i < reasoning.size(); ++i) {
    doc["choices"][i]["message"]["reasoning_content"] =
        reasoning[i].empty() ? nlohmann::json() : nlohmann::json(reasoning[i]);
  }
  if (r.prompt_logprobs >= 0) {
    // vLLM's places: per choice for completions, once for the chat's one prompt.
    const auto of = [&](size_t i) {
      return prompt_logprobs_json(e.tokenizer(), prompts[i / per_prompt].tokens,
                                  results[i].prompt_logprobs, r.prompt_logprobs);
    };
    if (endpoint == Endpoint::Completions) {
      for (size_t i = 0; i < results.size(); ++i) doc["choices"][i]["prompt_logprobs"] = of(i);
    } else {
      doc["prompt_logprobs"] = of(0);
    }
  }
  res.send(200, "application/json", to_wire(doc));
}

void HttpServer::Impl::stream(const std::vector<std::shared_ptr<Job>>& jobs,
                              const ResponseMeta& meta, std::span<const EchoedPrompt> echoes,
                              size_t choices_per_prompt, bool include_usage, HttpResponder& res) {
  if (!begin_event_stream(res, jobs)) return;
  auto write = [&res](const std::string& s) { return res.write(s); };
  // Per choice: whether its first chunk went out, the bytes of text sent (the completions
  // format's text offsets), whether it has ended (its final chunk sent), and with echo whether
  // its prompt went out yet and the logprob entries held until it does.
  struct Choice {
    bool first = true, ended = false, echo_pending = false;
    size_t text_bytes = 0;
    std::vector<TokenLogprob> held;
    // With tools: the whole reply so far and how much of it went out as content; from a
    // "<tool_call>" on it is held until the end, when the calls go out whole.
    std::string reply;
    size_t reply_sent = 0;
    std::vector<TokenLogprob> reply_logprobs;  // of text not sent yet
    // A thinking model's: the reasoning goes out as reasoning_content deltas first.
    std::optional<ReasoningStream> thinking;
    std::vector<TokenLogprob> thinking_held;  // entries of text the reasoning split holds
  };
  const bool tools = !meta.tool_names.empty();
  std::vector<Choice> choices(jobs.size());
  if (meta.reasoning.split) {
    for (Choice& c : choices) c.thinking.emplace(meta.reasoning.opened);
  }
  // The echoed prompt goes first, as its own chunk. Without logprobs it is known now; with them
  // it waits for the prompt's entries, which the engine sends before any text (the first
  // prompt_tokens - 1 entries a choice receives).
  const auto send_echo = [&](size_t i, std::span<const TokenLogprob> entries) {
    Choice& c = choices[i];
    c.echo_pending = false;
    c.text_bytes = echoes[i].text.size();
    const nlohmann::json lp =
        meta.logprobs ? echo_logprobs_json(meta, echoes[i], entries) : nlohmann::json();
    if (write(sse_event(
            text_chunk_json(meta, echoes[i].text, c.first, lp, static_cast<int32_t>(i))))) {
      c.first = false;
      return true;
    }
    return false;
  };
  for (size_t i = 0; i < echoes.size(); ++i) {
    choices[i].echo_pending = true;
    if (!meta.logprobs && !send_echo(i, {})) {
      cancel_jobs(jobs);
      return;
    }
  }
  std::vector<TokenLogprob> logprobs;
  size_t open = jobs.size();
  // One choice waits as a single request does; with several, each is polled briefly in turn so
  // that none waits behind another's silence.
  const milliseconds poll = jobs.size() == 1 ? kPollInterval : milliseconds(5);
  while (open > 0) {
    bool any_text = false;
    for (size_t i = 0; i < jobs.size(); ++i) {
      Choice& c = choices[i];
      if (c.ended) continue;
      std::string text;
      logprobs.clear();
      const bool done = jobs[i]->wait(text, poll, meta.logprobs ? &logprobs : nullptr);
      const auto index = static_cast<int32_t>(i);
      if (c.echo_pending) {
        c.held.insert(c.held.end(), logprobs.begin(), logprobs.end());
        logprobs.clear();
        const size_t n_prompt = echoes[i].tokens.size() - 1;
        if (c.held.size() >= n_prompt) {
          if (!send_echo(i, std::span<const TokenLogprob>(c.held).first(n_prompt))) {
            cancel_jobs(jobs);
            return;
          }
          logprobs.assign(c.held.begin() + static_cast<std::ptrdiff_t>(n_prompt), c.held.end());
          c.held.clear();
        }
      }
      // One chunk of reasoning; false when the client is gone (the jobs are then cancelled).
      auto send_reasoning = [&](const std::string& reasoning, const nlohmann::json& lp) {
        any_text = true;
        if (!write(sse_event(reasoning_chunk_json(meta, reasoning, c.first, lp, index)))) {
          cancel_jobs(jobs);
          return false;
        }
        c.first = false;
        return true;
      };
      if (c.thinking && meta.reasoning.whole_content) {
        // deepseek-legacy: the reasoning goes out as it comes, and the text, all of it, goes on
        // as the reply's (with the entries of its tokens, as without reasoning).
        ReasoningSplit piece = c.thinking->push(text);
        if (done) piece.reasoning += c.thinking->finish().reasoning;
        if (!piece.reasoning.empty() && !send_reasoning(piece.reasoning, nlohmann::json())) return;
      } else if (c.thinking) {
        // Reasoning goes out as it comes (with the entries of its tokens); what follows the
        // block goes on as the reply's text.
        ReasoningSplit piece = c.thinking->push(text);
        if (done) {
          const ReasoningSplit rest = c.thinking->finish();
          piece.reasoning += rest.reasoning;
          piece.content += rest.content;
        }
        logprobs.insert(logprobs.begin(), c.thinking_held.begin(), c.thinking_held.end());
        c.thinking_held.clear();
        if (!piece.reasoning.empty()) {
          if (!send_reasoning(piece.reasoning, meta.logprobs
                                                   ? logprobs_json(meta, logprobs, c.text_bytes)
                                                   : nlohmann::json())) {
            return;
          }
          logprobs.clear();
        }
        text = std::move(piece.content);
        if (text.empty() && !done && !tools) c.thinking_held.swap(logprobs);  // wait for text
      }
      if (tools && (!text.empty() || !logprobs.empty())) {
        any_text = any_text || !text.empty();
        c.reply += text;
        c.reply_logprobs.insert(c.reply_logprobs.end(), logprobs.begin(), logprobs.end());
        logprobs.clear();
        const size_t can = streamable_content(c.reply);
        if (can > c.reply_sent) {
          const nlohmann::json lp =
              meta.logprobs ? logprobs_json(meta, c.reply_logprobs, 0) : nlohmann::json();
          if (!write(sse_event(text_chunk_json(
                  meta, std::string_view(c.reply).substr(c.reply_sent, can - c.reply_sent), c.first,
                  lp, index)))) {
            cancel_jobs(jobs);
            return;
          }
          c.first = false;
          c.reply_sent = can;
          c.reply_logprobs.clear();
        }
        text.clear();
      }
      if (!text.empty()) {
        any_text = true;
        const nlohmann::json lp =
            meta.logprobs ? logprobs_json(meta, logprobs, c.text_bytes) : nlohmann::json();
        c.text_bytes += text.size();
        if (!write(sse_event(text_chunk_json(meta, text, c.first, lp, index)))) {
          cancel_jobs(jobs);
          return;
        }
        c.first = false;
        logprobs.clear();  // sent with this chunk
      }
      if (!done) continue;
      const Job& j = *jobs[i];
      bool ok = true;
      if (std::optional<ApiError> err = job_error(j)) {
        ok = write(sse_event(error_json(*err)));
      } else {
        bool called = false;
        if (tools) {
          // The held rest of the reply: its calls, or (none parsed) the text itself.
          const SplitReply reply =
              split_tool_calls(c.reply, meta.tool_names, tool_call_seed(meta, i));
          const nlohmann::json lp = meta.logprobs && !c.reply_logprobs.empty()
                                        ? logprobs_json(meta, c.reply_logprobs, 0)
                                        : nlohmann::json();
          if (!reply.calls.empty()) {
            called = true;
            ok = write(sse_event(tool_calls_chunk_json(meta, reply.calls, c.first, lp, index)));
          } else if (c.reply_sent < c.reply.size()) {
            ok = write(sse_event(text_chunk_json(
                meta, std::string_view(c.reply).substr(c.reply_sent), c.first, lp, index)));
          }
          c.first = false;
          logprobs.clear();
        }
        // Logprobs that came after the last text (the end-of-generation token's are dropped).
        const nlohmann::json lp = meta.logprobs && !logprobs.empty()
                                      ? logprobs_json(meta, logprobs, c.text_bytes)
                                      : nlohmann::json();
        ok = ok && write(sse_event(final_chunk_json(meta, j.result(), lp, index, called)));
      }
      if (!ok) {
        cancel_jobs(jobs);
        return;
      }
      c.ended = true;
      --open;
    }
    if (!any_text && open > 0 && res.peer_closed()) {
      cancel_jobs(jobs);
      res.close_after();
      return;
    }
  }
  bool ok = true;
  if (include_usage) {
    std::vector<GenerationResult> results;
    for (const auto& job : jobs) {
      if (!job->failed()) results.push_back(job->result());
    }
    ok = write(sse_event(usage_chunk_json(meta, combined_stats(results, choices_per_prompt))));
  }
  ok = ok && write(std::string(kSseDone));
  if (ok) {
    res.end_stream();
  } else {
    cancel_jobs(jobs);
  }
}

}  // namespace specdec::server
