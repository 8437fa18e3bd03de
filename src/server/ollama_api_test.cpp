#include "server/ollama_api.h"

#include <gtest/gtest.h>

#include <regex>

#include "server/refusal_test_support.h"

namespace specdec::server {
namespace {

using nlohmann::json;

const json kUser = json::array({{{"role", "user"}, {"content", "hi"}}});

OllamaRequest chat(const json& body) { return parse_ollama_chat(body.dump()); }
OllamaRequest generate(const json& body) { return parse_ollama_generate(body.dump()); }

std::string refused_chat(const json& body) {
  return testing::refused_field([](const json& b) { return chat(b); }, body);
}
std::string refused_generate(const json& body) {
  return testing::refused_field([](const json& b) { return generate(b); }, body);
}

TEST(OllamaApi, ChatTakesOllamasDefaultsAndStreamsUnlessToldNot) {
  const OllamaRequest o = chat({{"model", "m:latest"}, {"messages", kUser}});
  const CompletionRequest& r = o.request;
  EXPECT_EQ(o.model, "m:latest");  // what responses repeat
  EXPECT_EQ(r.model, "m");         // what selects the model
  EXPECT_EQ(r.endpoint, Endpoint::ChatCompletions);
  EXPECT_TRUE(r.stream);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.8f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_FALSE(r.max_tokens.has_value());  // until the turn or the context ends
  // Ollama's runner: a repetition penalty of 1.1 over the last 64 tokens of prompt and text, and
  // the temperature before top-p.
  EXPECT_FLOAT_EQ(r.penalties.repetition_penalty, 1.1f);
  EXPECT_EQ(r.penalties.last_n, 64);
  EXPECT_FALSE(r.sampling.temperature_last);
  EXPECT_FALSE(o.load_only);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].content, "hi");
  EXPECT_FALSE(chat({{"model", "m"}, {"messages", kUser}, {"stream", false}}).request.stream);
}

TEST(OllamaApi, OptionsBecomeTheSamplingSettings) {
  const OllamaRequest o = chat({{"model", "m"},
                                {"messages", kUser},
                                {"options",
                                 {{"temperature", 0},
                                  {"top_k", 5},
                                  {"top_p", 0.5},
                                  {"min_p", 0.1},
                                  {"typical_p", 0.7},
                                  {"mirostat", 2},
                                  {"mirostat_tau", 4},
                                  {"mirostat_eta", 0.3},
                                  {"seed", 42},
                                  {"num_predict", 17},
                                  {"stop", {"\n\n", "END"}},
                                  {"repeat_penalty", 1.2},
                                  {"repeat_last_n", -1},
                                  {"presence_penalty", 0.5},
                                  {"frequency_penalty", 0.25},
                                  // Load options: this server's own, accepted and inert.
                                  {"num_ctx", 32768},
                                  {"num_gpu", 99},
                                  {"num_thread", 8},
                                  {"use_mmap", true},
                                  {"unknown_option", 1}}}});
  const CompletionRequest& r = o.request;
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_k, 5);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(r.sampling.typical_p, 0.7f);
  EXPECT_EQ(r.sampling.mirostat, 2);
  EXPECT_FLOAT_EQ(r.sampling.mirostat_tau, 4.0f);
  EXPECT_FLOAT_EQ(r.sampling.mirostat_eta, 0.3f);
  EXPECT_EQ(r.seed, 42u);
  EXPECT_EQ(r.max_tokens, 17);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_FLOAT_EQ(r.penalties.repetition_penalty, 1.2f);
  EXPECT_EQ(r.penalties.last_n, PenaltyParams::kWholeText);  // -1: all of the text
  EXPECT_FLOAT_EQ(r.penalties.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.penalties.frequency_penalty, 0.25f);
  for (int n : {-1, -2}) {
    EXPECT_FALSE(chat({{"model", "m"}, {"messages", kUser}, {"options", {{"num_predict", n}}}})
                     .request.max_tokens.has_value());
  }
  // repeat_last_n 0 turns the penalties off, as in Ollama.
  const OllamaRequest off =
      chat({{"model", "m"},
            {"messages", kUser},
            {"options", {{"repeat_penalty", 1.3}, {"presence_penalty", 1}, {"repeat_last_n", 0}}}});
  EXPECT_FALSE(off.request.penalties.active());
  // Ollama's window: its default 64 unless given, llama.cpp's rule (the prompt counts).
  EXPECT_EQ(chat({{"model", "m"}, {"messages", kUser}}).request.penalties.last_n, 64);
  EXPECT_EQ(chat({{"model", "m"},
                  {"messages", kUser},
                  {"options", {{"repeat_penalty", 1.1}, {"repeat_last_n", 128}}}})
                .request.penalties.last_n,
            128);
}

TEST(OllamaApi, RefusalsNameOllamasFields) {
  const auto with_options = [](const json& options) {
    return json{{"model", "m"}, {"messages", kUser}, {"options", options}};
  };
  EXPECT_EQ(refused_chat(with_options({{"temperature", "hot"}})), "options.temperature");
  EXPECT_EQ(refused_chat(with_options({{"temperature", 9}})), "options.temperature");
  EXPECT_EQ(refused_chat(with_options({{"top_p", 2}})), "options.top_p");
  EXPECT_EQ(refused_chat(with_options({{"num_predict", -5}})), "options.num_predict");
  EXPECT_EQ(refused_chat(with_options({{"num_predict", 1.5}})), "options.num_predict");
  EXPECT_EQ(refused_chat(with_options({{"mirostat", 4}})), "options.mirostat");
  EXPECT_EQ(refused_chat(with_options({{"mirostat_eta", -0.1}})), "options.mirostat_eta");
  EXPECT_EQ(refused_chat(with_options({{"typical_p", -0.5}})), "options.typical_p");
  EXPECT_EQ(refused_chat(with_options({{"tfs_z", 0.9}})), "options.tfs_z");
  EXPECT_EQ(refused_chat(with_options({{"repeat_penalty", 1.1}, {"repeat_last_n", -5}})),
            "options.repeat_last_n");
  EXPECT_EQ(refused_chat(with_options({{"repeat_last_n", "all"}})), "options.repeat_last_n");
  EXPECT_EQ(refused_chat(with_options(json::array())), "options");
  EXPECT_EQ(refused_chat({{"model", "m"}, {"messages", kUser}, {"format", "xml"}}), "format");
  EXPECT_EQ(refused_chat({{"model", "m"}, {"messages", kUser}, {"format", 3}}), "format");
  EXPECT_EQ(refused_chat({{"model", "m"}, {"messages", kUser}, {"stream", "yes"}}), "stream");
  EXPECT_EQ(refused_chat({{"model", "m"}, {"messages", kUser}, {"top_logprobs", 2}}),
            "top_logprobs");  // without logprobs
  EXPECT_EQ(
      refused_chat({{"model", "m"}, {"messages", kUser}, {"logprobs", true}, {"top_logprobs", 21}}),
      "top_logprobs");
  EXPECT_EQ(refused_chat({{"messages", kUser}}), "model");
  EXPECT_EQ(refused_chat({{"model", ""}, {"messages", kUser}}), "model");
  EXPECT_EQ(refused_chat({{"model", "m"}, {"messages", "hi"}}), "messages");
  EXPECT_EQ(refused_chat({{"model", "m"}, {"messages", {{{"content", "hi"}}}}}),
            "messages[0].role");
  EXPECT_EQ(refused_chat({{"model", "m"}, {"messages", {{{"role", "wizard"}, {"content", "x"}}}}}),
            "messages[0].role");
  EXPECT_EQ(refused_chat({{"model", "m"}, {"messages", {{{"role", "user"}, {"content", 3}}}}}),
            "messages[0].content");
  EXPECT_EQ(
      refused_chat(
          {{"model", "m"},
           {"messages", {{{"role", "user"}, {"content", "what is this?"}, {"images", {"aGk="}}}}}}),
      "messages[0].images");
  EXPECT_EQ(refused_chat({{"model", "m"},
                          {"messages",
                           {{{"role", "user"}, {"content", "x"}},
                            {{"role", "assistant"}, {"tool_calls", {{{"function", 1}}}}}}}}),
            "messages[1].tool_calls[0].function");
  EXPECT_EQ(refused_chat({{"model", "m"}, {"messages", kUser}, {"think", 1}}), "think");
}

TEST(OllamaApi, ThinkSwitchesAThinkingTemplate) {
  EXPECT_FALSE(chat({{"model", "m"}, {"messages", kUser}}).think.has_value());
  EXPECT_FALSE(chat({{"model", "m"}, {"messages", kUser}}).request.enable_thinking.has_value());
  const OllamaRequest off = chat({{"model", "m"}, {"messages", kUser}, {"think", false}});
  EXPECT_EQ(off.think, false);
  EXPECT_EQ(off.request.enable_thinking, false);
  EXPECT_EQ(chat({{"model", "m"}, {"messages", kUser}, {"think", true}}).request.enable_thinking,
            true);
  // An effort level (gpt-oss's) means: think.
  EXPECT_EQ(generate({{"model", "m"}, {"prompt", "x"}, {"think", "high"}}).request.enable_thinking,
            true);
}

TEST(OllamaApi, ToolCallsTurnsAndAPrefillAreTheChatTurnsTheyMean) {
  const json tools = json::array(
      {{{"type", "function"},
        {"function",
         {{"name", "add"},
          {"parameters",
           {{"type", "object"},
            {"properties", {{"a", {{"type", "integer"}}}, {"b", {{"type", "integer"}}}}}}}}}}});
  const OllamaRequest o = chat(
      {{"model", "m"},
       {"tools", tools},
       {"messages",
        {{{"role", "system"}, {"content", "Be brief."}},
         {{"role", "user"}, {"content", "2+3?"}},
         {{"role", "assistant"},
          {"content", ""},
          {"thinking", "hm"},
          {"tool_calls", {{{"function", {{"name", "add"}, {"arguments", {{"a", 2}, {"b", 3}}}}}}}}},
         {{"role", "tool"}, {"content", "5"}, {"tool_name", "add"}},
         {{"role", "assistant"}, {"content", "The sum is"}}}}});
  const CompletionRequest& r = o.request;
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  ASSERT_EQ(r.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[2].tool_calls[0].name, "add");
  EXPECT_EQ(json::parse(r.messages[2].tool_calls[0].arguments), json({{"a", 2}, {"b", 3}}));
  EXPECT_EQ(r.messages[3].role, "tool");
  EXPECT_EQ(r.messages[3].content, "5");
  EXPECT_EQ(r.prefill, "The sum is");  // a final assistant message is continued
  ASSERT_EQ(r.tools.tools.size(), 1u);
  EXPECT_EQ(r.tools.tools[0].name, "add");
  EXPECT_TRUE(r.tools.lazy);  // Ollama's calls are the model's choice: tool_choice auto
  // The extension forces a call.
  const OllamaRequest forced =
      chat({{"model", "m"}, {"tools", tools}, {"messages", kUser}, {"tool_choice", "required"}});
  EXPECT_NE(forced.request.grammar, nullptr);
  EXPECT_FALSE(forced.request.tools.lazy);
}

TEST(OllamaApi, LogprobsAskForTheTargetsEntriesOnEveryForm) {
  EXPECT_EQ(chat({{"model", "m"}, {"messages", kUser}}).request.logprobs, -1);
  EXPECT_EQ(chat({{"model", "m"}, {"messages", kUser}, {"logprobs", true}}).request.logprobs, 0);
  EXPECT_EQ(chat({{"model", "m"}, {"messages", kUser}, {"logprobs", true}, {"top_logprobs", 3}})
                .request.logprobs,
            3);
  EXPECT_EQ(generate({{"model", "m"}, {"prompt", "x"}, {"logprobs", true}, {"top_logprobs", 2}})
                .request.logprobs,
            2);
  // The completions form (raw, suffix) too.
  const OllamaRequest raw = generate(
      {{"model", "m"}, {"prompt", "x"}, {"raw", true}, {"logprobs", true}, {"top_logprobs", 4}});
  EXPECT_EQ(raw.request.endpoint, Endpoint::Completions);
  EXPECT_EQ(raw.request.logprobs, 4);
  EXPECT_EQ(generate({{"model", "m"}, {"prompt", "x"}, {"raw", true}}).request.logprobs, -1);
  EXPECT_EQ(refused_generate({{"model", "m"}, {"prompt", "x"}, {"raw", true}, {"top_logprobs", 1}}),
            "top_logprobs");
}

TEST(OllamaApi, FormatConstrainsTheReply) {
  EXPECT_EQ(chat({{"model", "m"}, {"messages", kUser}}).request.grammar, nullptr);
  EXPECT_EQ(chat({{"model", "m"}, {"messages", kUser}, {"format", ""}}).request.grammar, nullptr);
  EXPECT_NE(chat({{"model", "m"}, {"messages", kUser}, {"format", "json"}}).request.grammar,
            nullptr);
  const json schema = {
      {"type", "object"}, {"properties", {{"n", {{"type", "integer"}}}}}, {"required", {"n"}}};
  EXPECT_NE(chat({{"model", "m"}, {"messages", kUser}, {"format", schema}}).request.grammar,
            nullptr);
}

TEST(OllamaApi, NothingToGenerateIsALoadOrAnUnload) {
  for (const json& body :
       {json{{"model", "m"}}, json{{"model", "m"}, {"messages", json::array()}}}) {
    const OllamaRequest o = chat(body);
    EXPECT_TRUE(o.load_only);
    EXPECT_FALSE(o.unload);
  }
  EXPECT_TRUE(chat({{"model", "m"}, {"keep_alive", 0}}).unload);
  EXPECT_TRUE(generate({{"model", "m"}, {"keep_alive", "0s"}}).unload);
  EXPECT_FALSE(generate({{"model", "m"}, {"keep_alive", "5m"}}).unload);
  EXPECT_TRUE(generate({{"model", "m"}, {"prompt", ""}}).load_only);
  EXPECT_FALSE(generate({{"model", "m"}, {"prompt", ""}, {"suffix", "x"}}).load_only);
}

TEST(OllamaApi, GenerateIsAChatTurnARawPromptOrAnInfill) {
  const OllamaRequest turn = generate({{"model", "m"}, {"prompt", "hi"}, {"system", "Be brief."}});
  EXPECT_EQ(turn.request.endpoint, Endpoint::ChatCompletions);
  ASSERT_EQ(turn.request.messages.size(), 2u);
  EXPECT_EQ(turn.request.messages[0].content, "Be brief.");
  EXPECT_EQ(turn.request.messages[1].role, "user");
  EXPECT_EQ(turn.request.messages[1].content, "hi");
  EXPECT_FALSE(turn.raw);

  const OllamaRequest raw = generate(
      {{"model", "m"}, {"prompt", "<|im_start|>user"}, {"raw", true}, {"context", {1, 2}}});
  EXPECT_TRUE(raw.raw);
  EXPECT_EQ(raw.request.endpoint, Endpoint::Completions);
  ASSERT_EQ(raw.request.prompts.size(), 1u);
  EXPECT_EQ(raw.request.prompts[0].text, "<|im_start|>user");
  EXPECT_EQ(raw.context, (std::vector<int32_t>{1, 2}));
  EXPECT_FALSE(raw.request.max_tokens.has_value());  // not the completions endpoint's 16

  const OllamaRequest infill = generate({{"model", "m"}, {"prompt", "def f():"}, {"suffix", "\n"}});
  EXPECT_EQ(infill.request.endpoint, Endpoint::Completions);
  EXPECT_EQ(infill.request.suffix, "\n");

  EXPECT_EQ(refused_generate({{"model", "m"}, {"prompt", "x"}, {"template", "{{ .Prompt }}"}}),
            "template");
  EXPECT_EQ(refused_generate({{"model", "m"}, {"prompt", "x"}, {"images", {"aGk="}}}), "images");
  EXPECT_EQ(refused_generate({{"model", "m"}, {"prompt", "x"}, {"context", {1, -2}}}),
            "context[1]");
  EXPECT_EQ(refused_generate({{"model", "m"}, {"prompt", "x"}, {"context", "1 2"}}), "context");
  EXPECT_EQ(refused_generate({{"model", "m"}, {"prompt", "x"}, {"suffix", "y"}, {"raw", true}}),
            "suffix");
  EXPECT_EQ(refused_generate({{"model", "m"}, {"prompt", 3}}), "prompt");
  EXPECT_EQ(refused_generate({{"model", "m"}, {"prompt", "x"}, {"options", {{"top_k", -1}}}}),
            "options.top_k");
}

TEST(OllamaApi, ModelNamesMayCarryTheLatestTag) {
  EXPECT_EQ(ollama_model_name("qwen:latest"), "qwen");
  EXPECT_EQ(ollama_model_name("qwen:7b"), "qwen:7b");
  EXPECT_EQ(ollama_model_name(":latest"), ":latest");
  EXPECT_EQ(parse_ollama_show(R"({"name": "x:latest"})"), "x:latest");  // the older field
  EXPECT_EQ(parse_ollama_show(R"({"model": "y"})"), "y");
  EXPECT_THROW(parse_ollama_show("{}"), ApiError);
  EXPECT_THROW(parse_ollama_show("[1]"), ApiError);
}

GenerationResult finished(FinishReason finish) {
  GenerationResult r;
  r.text = "Hi.";
  r.finish = finish;
  r.stats.prompt_tokens = 12;
  r.stats.generated_tokens = 3;
  r.stats.prefill_ms = 1.5;
  r.stats.decode_ms = 20;
  return r;
}

TEST(OllamaApi, ResponsesCarryOllamasCountsDurationsAndReasons) {
  OllamaMeta meta;
  meta.model = "m:latest";
  const GenerationResult r = finished(FinishReason::EndOfGeneration);
  const SplitReply reply{"Hi.", {}};
  const std::vector<int32_t> context = {1, 2, 3};
  const json gen = ollama_done_json({meta.model, false, {}, 0}, r, 5'000'000, &context, &reply);
  EXPECT_EQ(gen["model"], "m:latest");
  EXPECT_EQ(gen["response"], "Hi.");
  EXPECT_EQ(gen["done"], true);
  EXPECT_EQ(gen["done_reason"], "stop");
  EXPECT_EQ(gen["context"], json({1, 2, 3}));
  EXPECT_EQ(gen["total_duration"], 5'000'000);
  EXPECT_EQ(gen["prompt_eval_count"], 12);
  EXPECT_EQ(gen["prompt_eval_duration"], 1'500'000);
  EXPECT_EQ(gen["eval_count"], 3);
  EXPECT_EQ(gen["eval_duration"], 20'000'000);
  EXPECT_TRUE(std::regex_match(gen["created_at"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z)")))
      << gen["created_at"];

  const json chat_doc = ollama_done_json(meta, finished(FinishReason::Length), 1, nullptr, nullptr);
  EXPECT_EQ(chat_doc["message"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_EQ(chat_doc["done_reason"], "length");
  EXPECT_FALSE(chat_doc.contains("context"));
  EXPECT_STREQ(ollama_done_reason(finished(FinishReason::ContextFull)), "length");
  EXPECT_STREQ(ollama_done_reason(finished(FinishReason::Stop)), "stop");

  const json chunk = ollama_chunk_json(meta, "He");
  EXPECT_EQ(chunk["message"]["content"], "He");
  EXPECT_EQ(chunk["done"], false);
  EXPECT_EQ(ollama_chunk_json({meta.model, false, {}, 0}, "He")["response"], "He");

  const json calls = ollama_tool_calls_chunk_json(meta, {{"call_1", "add", R"({"a":2,"b":3})"}});
  const json& call = calls["message"]["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "add");
  EXPECT_EQ(call["function"]["arguments"], json({{"a", 2}, {"b", 3}}));  // an object, not text
  EXPECT_EQ(call["function"]["index"], 0);

  EXPECT_EQ(ollama_load_json(meta, false)["done_reason"], "load");
  EXPECT_EQ(ollama_load_json(meta, true)["done_reason"], "unload");
  EXPECT_EQ(ollama_error_json(invalid_request("bad")), json({{"error", "bad"}}));
  const std::string line = ollama_line(chunk);
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);  // one document per line
}

TEST(OllamaApi, TagsShowAndPsDescribeTheServedModel) {
  ModelFacts f;
  f.name = "qwen-1.5b";
  f.file = "/models/qwen-1.5b.gguf";
  f.file_bytes = 1'000;
  f.modified = 0;
  f.architecture = "qwen2";
  f.parameters = 1'777'000'000;
  f.size_label = "1.5B";
  f.quantization = "Q4_K_M";
  f.context = 4096;
  f.tools = true;
  const json tags = ollama_tags_json(f);
  ASSERT_EQ(tags["models"].size(), 1u);
  const json& m = tags["models"][0];
  EXPECT_EQ(m["name"], "qwen-1.5b:latest");
  EXPECT_EQ(m["size"], 1000);
  EXPECT_EQ(m["modified_at"], "1970-01-01T00:00:00Z");
  EXPECT_EQ(m["details"]["quantization_level"], "Q4_K_M");
  EXPECT_EQ(m["details"]["family"], "qwen2");
  const json show = ollama_show_json(f);
  EXPECT_EQ(show["capabilities"], json({"completion", "tools"}));
  EXPECT_EQ(show["model_info"]["qwen2.context_length"], 4096);  // the served context
  EXPECT_EQ(ollama_ps_json(f)["models"][0]["context_length"], 4096);
}

}  // namespace
}  // namespace specdec::server
