// POST /v1/embeddings (OpenAI), /embedding and /embeddings (llama-server), /api/embed and
// /api/embeddings (Ollama): each input is a job on the generation queue, so embeddings take
// slots as generations do, their passes batched with the other slots' (the bits of a vector do
// not depend on the batch, as a generation's text does not).
#include <deque>

#include "common/error.h"
#include "server/http_server_impl.h"
#include "server/json_fields.h"

namespace specdec::server {

void HttpServer::Impl::embeddings(EmbeddingApi api, const HttpRequest& req, HttpResponder& res) {
  const auto start = std::chrono::steady_clock::now();
  Engine& e = ready_engine();
  if (draining.load()) throw shutting_down_error();
  const EmbeddingRequest r = parse_embedding_request(api, req.body);
  if (is_ollama(api)) {
    check_ollama_model(r.model);
  } else {
    check_model(r.model, model_ids);
  }
  Pooling pooling = Pooling::Last;
  if (config.pooling) {
    pooling = *config.pooling;
  } else {
    try {
      pooling = default_pooling(e.target_config());
    } catch (const Error& err) {
      throw ApiError(501, str_cat(err.what(), "; start the server with --pooling mean|cls|last"),
                     "server_error", "", "not_implemented");
    }
  }
  // One vector per input is what these clients read; per-token vectors only llama-server's own
  // endpoint returns (llama-server's wording).
  if (pooling == Pooling::None && api != EmbeddingApi::Native) {
    throw invalid_request(
        "Pooling type 'none' is not OAI compatible. Please use a different pooling type", "",
        "invalid_value");
  }
  const int32_t width = e.target_config().n_embd;
  if (r.dimensions && *r.dimensions > width) {
    bad_field("dimensions", str_cat("must be at most ", width,
                                    " (the model's embedding width), got ", *r.dimensions));
  }

  // The inputs' tokens, each checked against the vocabulary and the context.
  const int32_t n_vocab = e.tokenizer().n_vocab();
  const char* param = is_ollama(api) ? (api == EmbeddingApi::Ollama ? "input" : "prompt") : "input";
  std::vector<std::vector<int32_t>> inputs;
  int64_t prompt_tokens = 0;
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const std::string name =
        r.inputs.size() == 1 ? std::string(param) : str_cat(param, "[", i, "]");
    std::vector<int32_t> tokens =
        r.inputs[i].tokens ? *r.inputs[i].tokens : e.tokenize_prompt(r.inputs[i].text);
    if (tokens.empty()) bad_field(name, "has no tokens");
    for (int32_t id : tokens) {
      if (id >= n_vocab) {
        bad_field(name, str_cat("holds token id ", id, ", outside the vocabulary of ", n_vocab,
                                " tokens"));
      }
    }
    if (static_cast<int64_t>(tokens.size()) > e.n_ctx()) {
      if (!r.truncate) {
        bad_field(name,
                  str_cat("has ", tokens.size(), " tokens, more than the context of ", e.n_ctx(),
                          " (raise -c, or shorten it)"),
                  "context_length_exceeded");
      }
      tokens.resize(static_cast<size_t>(e.n_ctx()));
    }
    prompt_tokens += static_cast<int64_t>(tokens.size());
    inputs.push_back(std::move(tokens));
  }

  // A vector per token is n_embd floats a token: one request returns at most a context's worth.
  if (pooling == Pooling::None && prompt_tokens > e.n_ctx()) {
    bad_field(param,
              str_cat("holds ", prompt_tokens, " tokens in all; with pooling none a request ",
                      "returns at most ", e.n_ctx(), " token vectors (the context)"),
              "context_length_exceeded");
  }

  GenerationOptions o;
  o.embedding = EmbeddingParams{pooling, r.normalize};
  // At most one job per slot in flight: a request with many inputs takes no more than its turn
  // of the queue, and the inputs run side by side, their passes batched.
  const size_t window = static_cast<size_t>(std::max(1, e.n_slots()));
  std::vector<std::vector<std::vector<float>>> vectors(inputs.size());
  std::deque<std::pair<size_t, std::shared_ptr<Job>>> running;
  const auto cancel_running = [&running] {
    for (auto& [index, job] : running) job->cancel();
  };
  size_t next = 0;
  while (next < inputs.size() || !running.empty()) {
    while (next < inputs.size() && running.size() < window) {
      std::shared_ptr<Job> job = queue->submit(inputs[next], o);
      if (!job) {
        cancel_running();
        if (draining.load()) throw shutting_down_error();
        throw ApiError(503,
                       str_cat("the server is busy: ", config.queue_size,
                               " requests are already waiting; retry later"),
                       "server_error", "", "queue_full");
      }
      running.emplace_back(next++, std::move(job));
    }
    auto [index, job] = running.front();
    std::string ignored;
    while (!job->wait(ignored, kPollInterval)) {
      ignored.clear();
      if (res.peer_closed()) {
        cancel_running();
        res.close_after();
        res.send(kClientClosed, "application/json", "");  // counted; the client never sees it
        return;
      }
    }
    running.pop_front();
    if (std::optional<ApiError> err = job_error(*job)) {
      cancel_running();
      throw *err;
    }
    vectors[index] = job->result().embedding;
    if (r.dimensions) {
      for (std::vector<float>& v : vectors[index]) {
        shorten_embedding(v, *r.dimensions, pooling == Pooling::None ? -1 : r.normalize);
      }
    }
  }
  const double total_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const std::string model = r.model.empty() ? config.model_id : r.model;
  res.send(200, "application/json",
           to_wire(embeddings_json(r, model, vectors, prompt_tokens, total_ms)));
}

}  // namespace specdec::server
