// Anthropic's Messages API: POST /v1/messages (whole or streamed) and
// /v1/messages/count_tokens (server/anthropic_api.h holds the request and response shapes).
#include <functional>
#include <optional>

#include "common/error.h"
#include "server/http_server_impl.h"

namespace specdec::server {

using nlohmann::json;

void HttpServer::Impl::messages(const HttpRequest& req, HttpResponder& res) {
  Engine& e = ready_engine();
  if (draining.load()) throw shutting_down_error();
  const CompletionRequest r =
      parse_messages_request(req.body, /*count_only=*/false, config.request_defaults);
  check_model(r.model, model_ids);
  const std::vector<int32_t> prompt = e.tokenize_prompt(chat_prompt_text(r, e));
  const auto n = static_cast<int32_t>(prompt.size());
  if (n >= e.n_ctx()) {
    // Anthropic's own wording, which clients read the numbers from.
    throw invalid_request(
        str_cat("prompt is too long: ", n, " tokens > ", e.n_ctx() - 1, " maximum"), "messages",
        "context_length_exceeded");
  }
  // max_tokens is required and clients size it for large hosted models (tens of thousands of
  // tokens): it goes to the engine as asked, which ends the reply where the context does
  // (finish ContextFull: stop_reason model_context_window_exceeded) instead of refusing it.
  const GenerationOptions o = request_options(r, e);
  const std::vector<std::shared_ptr<Job>> jobs =
      submit_jobs({prompt}, {r.max_tokens.value_or(1)}, o, r);

  MessagesMeta meta;
  meta.id = "msg_" + make_id(Endpoint::Completions).substr(5);  // the hex after "cmpl-"
  meta.model = r.model.empty() ? config.model_id : r.model;
  for (const ToolSpec& t : r.tools.tools) meta.tool_names.push_back(t.name);
  meta.tool_id_seed = std::hash<std::string>{}(meta.id);
  meta.reasoning = reasoning_mode(r, e);
  if (r.stream) return messages_stream(jobs[0], meta, n, res);
  if (!wait_all(jobs, res)) return;
  const Job& j = *jobs[0];
  if (std::optional<ApiError> err = job_error(j)) throw *err;
  res.send(200, "application/json", to_wire(message_json(meta, j.result())));
}

void HttpServer::Impl::messages_stream(const std::shared_ptr<Job>& job, const MessagesMeta& meta,
                                       int32_t prompt_tokens, HttpResponder& res) {
  const std::vector<std::shared_ptr<Job>> jobs = {job};
  if (!begin_event_stream(res, jobs)) return;
  const auto send = [&res](const json& event) { return res.write(anthropic_event(event)); };
  const auto give_up = [&jobs] { cancel_jobs(jobs); };
  if (!send(message_start_json(meta, prompt_tokens)) || !send(json{{"type", "ping"}})) {
    return give_up();
  }
  // How much of the reply went out as text. With tools, what may be calls is held
  // (streamable_content) until the end, when the calls go out as tool_use blocks.
  const bool tools = !meta.tool_names.empty();
  size_t sent = 0;
  int32_t index = 0;
  bool text_open = false;
  bool thinking_open = false;
  // A thinking model's reasoning is the first block; it closes when the text (or the end) comes.
  const auto close_thinking = [&] {
    if (!thinking_open) return true;
    thinking_open = false;
    return send(signature_delta_json(index)) && send(block_stop_json(index++));
  };
  const ReasoningRelay thinking{meta.reasoning.opened, [&](std::string_view t) {
                                  if (!thinking_open && !send(thinking_block_start_json(index))) {
                                    return false;
                                  }
                                  thinking_open = true;
                                  return send(thinking_delta_json(index, t));
                                }};
  const auto send_text = [&](std::string_view text) {
    if (text.empty()) return true;
    if (!close_thinking()) return false;
    if (!text_open && !send(text_block_start_json(index))) return false;
    text_open = true;
    return send(text_delta_json(index, text));
  };
  const std::optional<std::string> relayed = relay_text(job, tools, res, send_text, sent, nullptr,
                                                        meta.reasoning.split ? &thinking : nullptr);
  if (!relayed) return;
  const std::string& reply = *relayed;  // what follows the reasoning
  if (const std::optional<ApiError> err = job_error(*job)) {
    if (send(anthropic_error_json(*err))) res.end_stream();
    return;
  }
  const SplitReply split = split_reply(meta, reply);
  const bool tool_use = !split.calls.empty();
  // No calls: what was held back is text after all.
  if (!tool_use && !send_text(std::string_view(reply).substr(sent))) return give_up();
  if (!close_thinking()) return give_up();
  if (text_open && !send(block_stop_json(index++))) return give_up();
  for (const ToolCall& call : split.calls) {
    if (!send(tool_use_block_start_json(index, call)) ||
        !send(input_json_delta_json(index, call)) || !send(block_stop_json(index++))) {
      return give_up();
    }
  }
  if (!send(message_delta_json(job->result(), tool_use)) || !send(message_stop_json())) {
    return give_up();
  }
  res.end_stream();
}

void HttpServer::Impl::count_tokens(const HttpRequest& req, HttpResponder& res) {
  Engine& e = ready_engine();
  const CompletionRequest r = parse_messages_request(req.body, /*count_only=*/true);
  check_model(r.model, model_ids);
  const size_t n = e.tokenize_prompt(chat_prompt_text(r, e)).size();
  res.send(200, "application/json", to_wire(json{{"input_tokens", n}}));
}

}  // namespace specdec::server
