#include "server/openai_format.h"

namespace specdec::server {

using nlohmann::json;

namespace {

const char* object_name(Endpoint e, bool chunk) {
  if (e == Endpoint::Completions) return "text_completion";  // also for its chunks
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

json base(const ResponseMeta& meta, bool chunk) {
  return json{{"id", meta.id},
              {"object", object_name(meta.endpoint, chunk)},
              {"created", meta.created},
              {"model", meta.model},
              {"system_fingerprint", "specdec"}};
}

json null_or(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

}  // namespace

const char* openai_finish_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop:
    case FinishReason::EndOfGeneration:
      return "stop";
    case FinishReason::Length:
    case FinishReason::ContextFull:
    case FinishReason::Cancelled:
      break;
  }
  return "length";
}

json usage_json(const GenerationStats& s) {
  return json{{"prompt_tokens", s.prompt_tokens},
              {"completion_tokens", s.generated_tokens},
              {"total_tokens", s.prompt_tokens + s.generated_tokens}};
}

json specdec_stats_json(const GenerationStats& s) {
  const double tps = s.decode_ms > 0 ? s.generated_tokens * 1000.0 / s.decode_ms : 0.0;
  return json{{"speculative", s.speculative}, {"draft_max", s.draft_max},
              {"rounds", s.spec.rounds},      {"drafted", s.spec.drafted},
              {"accepted", s.spec.accepted},  {"acceptance_rate", s.spec.acceptance_rate()},
              {"tokens_per_second", tps},     {"prefill_ms", s.prefill_ms},
              {"decode_ms", s.decode_ms}};
}

json completion_json(const ResponseMeta& meta, const GenerationResult& result) {
  json doc = base(meta, /*chunk=*/false);
  json choice = {{"index", 0}, {"finish_reason", openai_finish_reason(result.finish)}};
  if (meta.endpoint == Endpoint::Completions) {
    choice["text"] = result.text;
    choice["logprobs"] = nullptr;
  } else {
    choice["message"] = {{"role", "assistant"}, {"content", result.text}};
    choice["logprobs"] = nullptr;
  }
  doc["choices"] = json::array({choice});
  doc["usage"] = usage_json(result.stats);
  doc["specdec"] = specdec_stats_json(result.stats);
  return doc;
}

json text_chunk_json(const ResponseMeta& meta, std::string_view text, bool first) {
  json doc = base(meta, /*chunk=*/true);
  json choice = {{"index", 0}, {"finish_reason", nullptr}, {"logprobs", nullptr}};
  if (meta.endpoint == Endpoint::Completions) {
    choice["text"] = std::string(text);
  } else {
    choice["delta"] = {{"content", std::string(text)}};
    if (first) choice["delta"]["role"] = "assistant";  // OpenAI names the role once, first
  }
  doc["choices"] = json::array({choice});
  return doc;
}

json final_chunk_json(const ResponseMeta& meta, const GenerationResult& result) {
  json doc = base(meta, /*chunk=*/true);
  json choice = {
      {"index", 0}, {"finish_reason", openai_finish_reason(result.finish)}, {"logprobs", nullptr}};
  if (meta.endpoint == Endpoint::Completions) {
    choice["text"] = "";
  } else {
    choice["delta"] = json::object();
  }
  doc["choices"] = json::array({choice});
  doc["usage"] = usage_json(result.stats);
  doc["specdec"] = specdec_stats_json(result.stats);
  return doc;
}

json usage_chunk_json(const ResponseMeta& meta, const GenerationResult& result) {
  json doc = base(meta, /*chunk=*/true);
  doc["choices"] = json::array();
  doc["usage"] = usage_json(result.stats);
  return doc;
}

std::string to_wire(const json& doc) {
  return doc.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

std::string sse_event(const json& doc) { return "data: " + to_wire(doc) + "\n\n"; }

json error_json(const ApiError& e) {
  return json{{"error",
               {{"message", e.what()},
                {"type", e.type()},
                {"param", null_or(e.param())},
                {"code", null_or(e.code())}}}};
}

json models_json(const std::string& model_id, int64_t created) {
  return json{{"object", "list"},
              {"data", json::array({{{"id", model_id},
                                     {"object", "model"},
                                     {"created", created},
                                     {"owned_by", "specdec"}}})}};
}

}  // namespace specdec::server
