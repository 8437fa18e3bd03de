// OpenAI's Responses API: POST /v1/responses, whole or streamed (server/responses_api.h holds
// the request and response shapes).
#include <functional>

#include "common/error.h"
#include "server/http_server_impl.h"

namespace specdec::server {

using nlohmann::json;

namespace {

// The response object with its reasoning tokens counted.
json final_response(const ResponsesMeta& meta, const GenerationResult& result, const Engine& e) {
  const bool reasoned = !meta.reasoning.of(result.text).reasoning.empty();
  return response_json(meta, result,
                       count_reasoning_tokens(e.tokenizer(), result.tokens, reasoned));
}

}  // namespace

void HttpServer::Impl::responses(const HttpRequest& req, HttpResponder& res) {
  Engine& e = ready_engine();
  if (draining.load()) throw shutting_down_error();
  const ResponsesRequest r = parse_responses_request(req.body, config.request_defaults);
  check_model(r.chat.model, model_ids);
  const std::vector<int32_t> prompt = e.tokenize_prompt(chat_prompt_text(r.chat, e));
  const auto n = static_cast<int32_t>(prompt.size());
  if (n >= e.n_ctx()) {
    throw invalid_request(
        str_cat("the input has ", n, " tokens but the context holds ", e.n_ctx(), " tokens"),
        "input", "context_length_exceeded");
  }
  // Without max_output_tokens (-1), or with more than the context has room for, the engine
  // runs the reply to the context's end (status incomplete, as when max_output_tokens ends it).
  const GenerationOptions o = request_options(r.chat, e);
  const std::vector<std::shared_ptr<Job>> jobs =
      submit_jobs({prompt}, {r.chat.max_tokens.value_or(-1)}, o, r.chat);

  ResponsesMeta meta;
  meta.id = "resp_" + make_id(Endpoint::Completions).substr(5);  // the hex after "cmpl-"
  meta.created_at = unix_now();
  meta.model = r.chat.model.empty() ? config.model_id : r.chat.model;
  for (const ToolSpec& t : r.chat.tools.tools) meta.tool_names.push_back(t.name);
  meta.tool_id_seed = std::hash<std::string>{}(meta.id);
  meta.echo = r.echo;
  meta.reasoning = reasoning_mode(r.chat, e);
  if (r.chat.stream) return responses_stream(jobs[0], meta, res);
  if (!wait_all(jobs, res)) return;
  const Job& j = *jobs[0];
  if (std::optional<ApiError> err = job_error(j)) throw *err;
  res.send(200, "application/json", to_wire(final_response(meta, j.result(), e)));
}

// The events: response.created and .in_progress; a thinking model's reasoning item (its
// reasoning_text part and deltas, closed when the answer starts); the message item (added when
// its first non-space text is, then its output_text part and deltas); at the end the message's
// done events, each function call's item with its arguments, and response.completed (or
// .incomplete) holding the same items.
void HttpServer::Impl::responses_stream(const std::shared_ptr<Job>& job, const ResponsesMeta& meta,
                                        HttpResponder& res) {
  const std::vector<std::shared_ptr<Job>> jobs = {job};
  if (!begin_event_stream(res, jobs)) return;
  ResponseEvents events;
  const auto send = [&](json event) { return res.write(events(std::move(event))); };
  const auto give_up = [&jobs] { cancel_jobs(jobs); };
  const json in_progress = response_in_progress_json(meta);
  if (!send({{"type", "response.created"}, {"response", in_progress}}) ||
      !send({{"type", "response.in_progress"}, {"response", in_progress}})) {
    return give_up();
  }
  size_t next_index = 0;  // the output index the next item opens at

  // A thinking model's reasoning: one item, opened by its first piece.
  const json reasoning_part = {{"type", "reasoning_text"}, {"text", ""}};
  std::string reasoning;
  std::optional<size_t> reasoning_index;
  bool reasoning_open = false;
  const auto close_reasoning = [&] {
    if (!reasoning_open) return true;
    reasoning_open = false;
    const json item = reasoning_item_json(meta, reasoning, true);
    json done_part = reasoning_part;
    done_part["text"] = reasoning;
    const json& id = item["id"];
    return send({{"type", "response.reasoning_text.done"},
                 {"item_id", id},
                 {"output_index", *reasoning_index},
                 {"content_index", 0},
                 {"text", reasoning}}) &&
           send({{"type", "response.content_part.done"},
                 {"item_id", id},
                 {"output_index", *reasoning_index},
                 {"content_index", 0},
                 {"part", done_part}}) &&
           send({{"type", "response.output_item.done"},
                 {"output_index", *reasoning_index},
                 {"item", item}});
  };
  const json opening = reasoning_item_json(meta, "", false);  // the item as it opens
  const auto send_reasoning = [&](std::string_view text) {
    if (!reasoning_index) {
      reasoning_index = next_index++;
      reasoning_open = send({{"type", "response.output_item.added"},
                             {"output_index", *reasoning_index},
                             {"item", opening}}) &&
                       send({{"type", "response.content_part.added"},
                             {"item_id", opening["id"]},
                             {"output_index", *reasoning_index},
                             {"content_index", 0},
                             {"part", reasoning_part}});
      if (!reasoning_open) return false;
    }
    reasoning += text;
    return send({{"type", "response.reasoning_text.delta"},
                 {"item_id", opening["id"]},
                 {"output_index", *reasoning_index},
                 {"content_index", 0},
                 {"delta", text}});
  };
  const ReasoningRelay thinking{meta.reasoning.opened, send_reasoning};

  const std::string message_id = "msg_" + meta.id.substr(meta.id.find('_') + 1);
  const json part = {{"type", "output_text"},
                     {"text", ""},
                     {"annotations", json::array()},
                     {"logprobs", json::array()}};
  const bool tools = !meta.tool_names.empty();
  size_t sent = 0;      // of the reply, passed to send_text
  std::string pending;  // space before the message's first text: held until the item opens
  std::optional<size_t> message_index;
  const auto open_message = [&] {
    if (!close_reasoning()) return false;
    message_index = next_index++;
    return send({{"type", "response.output_item.added"},
                 {"output_index", *message_index},
                 {"item",
                  {{"id", message_id},
                   {"type", "message"},
                   {"status", "in_progress"},
                   {"role", "assistant"},
                   {"content", json::array()}}}}) &&
           send({{"type", "response.content_part.added"},
                 {"item_id", message_id},
                 {"output_index", *message_index},
                 {"content_index", 0},
                 {"part", part}});
  };
  // A reply that turns out to be only calls has no message item, so the item opens with the
  // first text that is not space.
  const auto send_text = [&](std::string_view text) {
    if (!message_index) {
      pending += text;
      if (pending.find_first_not_of(" \t\r\n") == std::string::npos) return true;
      if (!open_message()) return false;
      text = pending;
    }
    const bool ok = send({{"type", "response.output_text.delta"},
                          {"item_id", message_id},
                          {"output_index", *message_index},
                          {"content_index", 0},
                          {"delta", text},
                          {"logprobs", json::array()}});
    pending.clear();
    return ok;
  };
  const std::optional<std::string> relayed = relay_text(job, tools, res, send_text, sent, nullptr,
                                                        meta.reasoning.split ? &thinking : nullptr);
  if (!relayed) return;
  const std::string& reply = *relayed;  // what follows the reasoning
  if (const std::optional<ApiError> err = job_error(*job)) {
    if (send({{"type", "error"},
              {"code", err->code().empty() ? json(nullptr) : json(err->code())},
              {"message", err->what()},
              {"param", nullptr}})) {
      res.end_stream();
    }
    return;
  }
  const json response = final_response(meta, job->result(), ready_engine());
  const json& items = response["output"];
  size_t index = reasoning_index ? 1 : 0;  // the first item after the reasoning
  if (!close_reasoning()) return give_up();
  if (index < items.size() && items[index]["type"] == "message") {
    const json& message = items[index];
    const std::string final_text = message["content"][0]["text"].get<std::string>();
    // No calls: what was held back is text after all (with calls, the text before them went).
    if (index + 1 == items.size() && !send_text(std::string_view(reply).substr(sent))) {
      return give_up();
    }
    if (!message_index && !open_message()) return give_up();  // a reply of space, or none
    json done_part = part;
    done_part["text"] = final_text;
    if (!send({{"type", "response.output_text.done"},
               {"item_id", message_id},
               {"output_index", *message_index},
               {"content_index", 0},
               {"text", final_text},
               {"logprobs", json::array()}}) ||
        !send({{"type", "response.content_part.done"},
               {"item_id", message_id},
               {"output_index", *message_index},
               {"content_index", 0},
               {"part", done_part}}) ||
        !send({{"type", "response.output_item.done"},
               {"output_index", *message_index},
               {"item", message}})) {
      return give_up();
    }
    ++index;
  }
  for (; index < items.size(); ++index) {
    const json& call = items[index];
    json opening = call;
    opening["status"] = "in_progress";
    opening["arguments"] = "";
    if (!send(
            {{"type", "response.output_item.added"}, {"output_index", index}, {"item", opening}}) ||
        !send({{"type", "response.function_call_arguments.delta"},
               {"item_id", call["id"]},
               {"output_index", index},
               {"delta", call["arguments"]}}) ||
        !send({{"type", "response.function_call_arguments.done"},
               {"item_id", call["id"]},
               {"output_index", index},
               {"name", call["name"]},
               {"arguments", call["arguments"]}}) ||
        !send({{"type", "response.output_item.done"}, {"output_index", index}, {"item", call}})) {
      return give_up();
    }
  }
  const char* last =
      response["status"] == "completed" ? "response.completed" : "response.incomplete";
  if (!send({{"type", last}, {"response", response}})) return give_up();
  res.end_stream();
}

}  // namespace specdec::server
