#include "server/native_api.h"

#include <gtest/gtest.h>

namespace specdec::server {
namespace {

using nlohmann::json;

NativeRequest parse(NativeEndpoint e, const json& body) {
  return parse_native_request(e, body.dump());
}

std::string refused_param(NativeEndpoint e, const json& body) {
  try {
    parse(e, body);
  } catch (const ApiError& err) {
    EXPECT_EQ(err.status(), 400);
    return err.param();
  }
  ADD_FAILURE() << "accepted: " << body.dump();
  return "";
}

TEST(NativeApi, LlamaServersDefaultsAndNames) {
  const NativeRequest r = parse(NativeEndpoint::Completion, {{"prompt", "hi"}});
  EXPECT_FLOAT_EQ(r.base.sampling.temperature, 0.8f);
  EXPECT_EQ(r.base.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.base.sampling.top_p, 0.95f);
  EXPECT_FLOAT_EQ(r.base.sampling.min_p, 0.05f);
  EXPECT_EQ(r.n_predict, -1);
  EXPECT_FALSE(r.base.seed.has_value());
  EXPECT_EQ(r.base.samplers, (std::vector<std::string>{"top_k", "top_p", "min_p", "temperature"}));
  // llama-server's order: the temperature after the filters.
  EXPECT_TRUE(r.base.sampling.temperature_last);
  const NativeRequest s = parse(NativeEndpoint::Completion, {{"prompt", "hi"},
                                                             {"n_predict", 7},
                                                             {"n_probs", 2},
                                                             {"temperature", -1},
                                                             {"top_k", 0},
                                                             {"seed", -1},
                                                             {"n_cmpl", 3},
                                                             {"n_indent", 4},
                                                             {"t_max_predict_ms", 250},
                                                             {"stop", {"\n\n"}},
                                                             {"return_tokens", true}});
  EXPECT_EQ(s.n_predict, 7);
  EXPECT_EQ(s.base.max_tokens, 7);
  EXPECT_EQ(s.n_probs, 2);
  EXPECT_EQ(s.base.logprobs, 2);
  EXPECT_EQ(s.base.sampling.temperature, 0.0f);  // greedy at any temperature <= 0
  EXPECT_EQ(s.base.sampling.top_k, 0);           // <= 0: off
  EXPECT_FALSE(s.base.seed.has_value());
  EXPECT_EQ(s.base.n, 3);
  EXPECT_EQ(s.n_indent, 4);
  EXPECT_EQ(s.t_max_predict_ms, 250);
  EXPECT_EQ(s.base.stop, (std::vector<std::string>{"\n\n"}));
  EXPECT_TRUE(s.return_tokens);
  // The OpenAI name, which llama-server also reads; n_predict wins.
  EXPECT_EQ(parse(NativeEndpoint::Completion, {{"prompt", "x"}, {"max_tokens", 5}}).n_predict, 5);
  EXPECT_EQ(
      parse(NativeEndpoint::Completion, {{"prompt", "x"}, {"max_tokens", 5}, {"n_predict", 9}})
          .n_predict,
      9);
}

TEST(NativeApi, TheSamplersListSwitchesFiltersOff) {
  const NativeRequest r =
      parse(NativeEndpoint::Infill,
            {{"samplers", {"top_k", "top-p", "infill", "unknown"}}, {"top_p", 0.99}});
  EXPECT_EQ(r.base.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.base.sampling.top_p, 0.99f);
  EXPECT_EQ(r.base.sampling.min_p, 0.0f);
  EXPECT_EQ(r.base.sampling.temperature, 1.0f);
  EXPECT_EQ(r.base.samplers, (std::vector<std::string>{"top_k", "top_p"}));
  const NativeRequest p =
      parse(NativeEndpoint::Completion,
            {{"prompt", "x"}, {"repeat_penalty", 1.3}, {"samplers", {"top_k"}}});
  EXPECT_EQ(p.base.penalties.repetition_penalty, 1.0f);  // "penalties" not listed
  const NativeRequest q = parse(NativeEndpoint::Completion,
                                {{"prompt", "x"}, {"repeat_penalty", 1.3}, {"repeat_last_n", -1}});
  EXPECT_FLOAT_EQ(q.base.penalties.repetition_penalty, 1.3f);
  EXPECT_EQ(q.base.penalties.last_n, PenaltyParams::kWholeText);
  EXPECT_EQ(q.base.samplers.front(), "penalties");
  // llama-server's window: 64 unless given, 0 turns the penalties off.
  EXPECT_EQ(parse(NativeEndpoint::Completion, {{"prompt", "x"}, {"repeat_penalty", 1.3}})
                .base.penalties.last_n,
            64);
  const NativeRequest off = parse(NativeEndpoint::Completion,
                                  {{"prompt", "x"}, {"repeat_penalty", 1.3}, {"repeat_last_n", 0}});
  EXPECT_FALSE(off.base.penalties.active());
  // llama-server's letters: d dry, k top_k, y typical, p top_p, s top-n-sigma, m min_p,
  // t temperature, x XTC, e penalties; others (i: infill) are skipped.
  const NativeRequest letters = parse(NativeEndpoint::Completion, {{"prompt", "x"},
                                                                   {"samplers", "ikpt"},
                                                                   {"top_p", 0.9},
                                                                   {"typical_p", 0.5},
                                                                   {"min_p", 0.2},
                                                                   {"temperature", 0.6}});
  EXPECT_EQ(letters.base.samplers, (std::vector<std::string>{"top_k", "top_p", "temperature"}));
  EXPECT_EQ(letters.base.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(letters.base.sampling.top_p, 0.9f);
  EXPECT_FLOAT_EQ(letters.base.sampling.typical_p, 1.0f);  // y not given
  EXPECT_EQ(letters.base.sampling.min_p, 0.0f);            // m not given
  EXPECT_FLOAT_EQ(letters.base.sampling.temperature, 0.6f);
  EXPECT_TRUE(letters.base.sampling.temperature_last);
  const NativeRequest first =
      parse(NativeEndpoint::Completion,
            {{"prompt", "x"}, {"samplers", {"temperature", "top_k", "top_p"}}});
  EXPECT_FALSE(first.base.sampling.temperature_last);
  // An order specdec would not apply is refused, naming the field.
  EXPECT_EQ(
      refused_param(NativeEndpoint::Completion,
                    {{"prompt", "x"}, {"samplers", {"top_k", "top_p", "temperature", "min_p"}}}),
      "samplers");
  const NativeRequest all =
      parse(NativeEndpoint::Completion,
            {{"prompt", "x"}, {"samplers", "edskypmxt"}, {"typical_p", 0.5}, {"top_n_sigma", 2}});
  EXPECT_EQ(all.base.samplers, (std::vector<std::string>{"top_n_sigma", "top_k", "typ_p", "top_p",
                                                         "min_p", "temperature"}));
}

TEST(NativeApi, PromptForms) {
  const auto one = parse(NativeEndpoint::Completion, {{"prompt", {1, 2, "ab", 3}}});
  ASSERT_EQ(one.prompts.size(), 1u);
  ASSERT_EQ(one.prompts[0].size(), 3u);
  EXPECT_EQ(one.prompts[0][0].ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(one.prompts[0][1].text, "ab");
  EXPECT_EQ(one.prompts[0][2].ids, (std::vector<int32_t>{3}));
  const auto many = parse(NativeEndpoint::Completion, {{"prompt", {"a", json{4, "b"}}}});
  ASSERT_EQ(many.prompts.size(), 2u);
  EXPECT_EQ(many.prompts[1].size(), 2u);
  const auto infill =
      parse(NativeEndpoint::Infill,
            {{"input_prefix", "p"},
             {"input_suffix", "s"},
             {"prompt", "  "},
             {"input_extra", {{{"text", "t"}}, {{"filename", "f"}, {"text", "u"}}}}});
  EXPECT_EQ(infill.infill.prefix, "p");
  EXPECT_EQ(infill.infill.suffix, "s");
  EXPECT_EQ(infill.infill.prompt, "  ");
  ASSERT_EQ(infill.infill.extra.size(), 2u);
  EXPECT_EQ(infill.infill.extra[0].filename, "tmp");
  EXPECT_EQ(infill.infill.extra[1].filename, "f");
  EXPECT_TRUE(infill.prompts.empty());
}

TEST(NativeApi, LogitBiasForms) {
  const auto r = parse(NativeEndpoint::Completion,
                       {{"prompt", "x"}, {"logit_bias", {{5, false}, {"7", 2.5}, {"ab", -1}}}});
  const auto& ids = r.base.penalties.logit_bias;
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0], (std::pair<int32_t, float>{5, -100.0f}));
  EXPECT_EQ(ids[1], (std::pair<int32_t, float>{7, 2.5f}));
  ASSERT_EQ(r.text_bias.size(), 1u);
  EXPECT_EQ(r.text_bias[0], (std::pair<std::string, float>{"ab", -1.0f}));
  const auto o = parse(NativeEndpoint::Completion, {{"prompt", "x"}, {"logit_bias", {{"3", 1}}}});
  EXPECT_EQ(o.base.penalties.logit_bias.size(), 1u);
}

TEST(NativeApi, RefusalsNameTheField) {
  const auto c = NativeEndpoint::Completion;
  EXPECT_EQ(refused_param(c, {{"n_predict", 3}}), "prompt");
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"typical_p", -0.5}}), "typical_p");
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"mirostat", 3}}), "mirostat");
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"repeat_last_n", -2}}), "repeat_last_n");
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"mirostat", 1.5}}), "mirostat");
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"mirostat_tau", -1}}), "mirostat_tau");
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"mirostat_eta", "fast"}}), "mirostat_eta");
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"dry_multiplier", -0.8}}), "dry_multiplier");
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"dry_sequence_breakers", {1}}}),
            "dry_sequence_breakers");
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"dry_allowed_length", -1}}), "dry_allowed_length");
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"top_n_sigma", "wide"}}), "top_n_sigma");
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"xtc_probability", 1.5}}), "xtc_probability");
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"xtc_threshold", -1}}), "xtc_threshold");
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"temperature", "hot"}}), "temperature");
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"logit_bias", {{"ab", 500}}}}), "logit_bias");
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"logit_bias", 3}}), "logit_bias");
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"n_probs", 21}}), "n_probs");
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"cache_prompt", "yes"}}), "cache_prompt");
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"min_tokens", 5}, {"n_predict", 2}}), "min_tokens");
  EXPECT_EQ(refused_param(c, {{"prompt", json::array()}}), "prompt");
  EXPECT_EQ(refused_param(NativeEndpoint::Infill, {{"input_suffix", json::array()}}),
            "input_suffix");
  // Samplers that are off by their parameters are accepted.
  EXPECT_NO_THROW(parse(c, {{"prompt", "x"},
                            {"typical_p", 1.0},
                            {"xtc_probability", 0.5},
                            {"xtc_threshold", 0.9},
                            {"lora", json::array()}}));
}

TEST(NativeApi, TypicalTopNSigmaAndXtcFollowTheSamplersList) {
  const auto c = NativeEndpoint::Completion;
  const json body = {{"prompt", "x"},
                     {"typical_p", 0.7},
                     {"top_n_sigma", 1.5},
                     {"xtc_probability", 0.5},
                     {"xtc_threshold", 0.2}};
  const auto r = parse(c, body);
  EXPECT_FLOAT_EQ(r.base.sampling.typical_p, 0.7f);
  EXPECT_FLOAT_EQ(r.base.sampling.top_n_sigma, 1.5f);
  EXPECT_FLOAT_EQ(r.base.sampling.xtc_probability, 0.5f);
  EXPECT_FLOAT_EQ(r.base.sampling.xtc_threshold, 0.2f);
  EXPECT_EQ(r.base.samplers, (std::vector<std::string>{"top_n_sigma", "top_k", "typ_p", "top_p",
                                                       "min_p", "xtc", "temperature"}));
  // A list that leaves them out turns them off; llama-server's other names for them count.
  json listed = body;
  listed["samplers"] = {"top_k", "temperature"};
  const auto off = parse(c, listed);
  EXPECT_FLOAT_EQ(off.base.sampling.typical_p, 1.0f);
  EXPECT_LE(off.base.sampling.top_n_sigma, 0.0f);
  EXPECT_FLOAT_EQ(off.base.sampling.xtc_probability, 0.0f);
  listed["samplers"] = {"top-n-sigma", "typical", "xtc"};
  const auto on = parse(c, listed);
  EXPECT_EQ(on.base.samplers, (std::vector<std::string>{"top_n_sigma", "typ_p", "xtc"}));
  EXPECT_FLOAT_EQ(on.base.sampling.typical_p, 0.7f);
  // The same stages in an order specdec does not apply: a 400, not the default order silently.
  listed["samplers"] = {"typical", "top-n-sigma", "xtc"};
  EXPECT_EQ(refused_param(c, listed), "samplers");
  // The dynamic temperature belongs to the temperature stage: without it, it is off too.
  json dyn = {{"prompt", "x"}, {"dynatemp_range", 0.5}, {"dynatemp_exponent", 2}};
  EXPECT_FLOAT_EQ(parse(c, dyn).base.sampling.dynatemp_range, 0.5f);
  EXPECT_FLOAT_EQ(parse(c, dyn).base.sampling.dynatemp_exponent, 2.0f);
  dyn["samplers"] = {"top_k"};
  EXPECT_FLOAT_EQ(parse(c, dyn).base.sampling.dynatemp_range, 0.0f);
  EXPECT_EQ(refused_param(c, {{"prompt", "x"}, {"dynatemp_range", -1}}), "dynatemp_range");
  // typical_p above 1 is off, as in llama-server; an XTC threshold above 0.5 is not applied.
  const auto above = parse(
      c, {{"prompt", "x"}, {"typical_p", 3}, {"xtc_probability", 0.5}, {"xtc_threshold", 0.9}});
  EXPECT_FLOAT_EQ(above.base.sampling.typical_p, 1.0f);
  EXPECT_EQ(std::count(above.base.samplers.begin(), above.base.samplers.end(), "xtc"), 0);
}

TEST(NativeApi, MirostatTakesLlamaServersFieldsAndKeepsTheTemperature) {
  const auto c = NativeEndpoint::Completion;
  const auto r = parse(c, {{"prompt", "x"},
                           {"temperature", 0.7},
                           {"mirostat", 2},
                           {"mirostat_tau", 3.5},
                           {"mirostat_eta", 0.2}});
  EXPECT_EQ(r.base.sampling.mirostat, 2);
  EXPECT_FLOAT_EQ(r.base.sampling.mirostat_tau, 3.5f);
  EXPECT_FLOAT_EQ(r.base.sampling.mirostat_eta, 0.2f);
  EXPECT_FLOAT_EQ(r.base.sampling.temperature, 0.7f);
  // llama-server's defaults when only the version is given.
  const auto d = parse(c, {{"prompt", "x"}, {"mirostat", 1}});
  EXPECT_FLOAT_EQ(d.base.sampling.mirostat_tau, 5.0f);
  EXPECT_FLOAT_EQ(d.base.sampling.mirostat_eta, 0.1f);
  // Under Mirostat the samplers list does not change the temperature (llama-server ignores it).
  const auto listed =
      parse(c, {{"prompt", "x"}, {"temperature", 0.7}, {"mirostat", 2}, {"samplers", {"top_k"}}});
  EXPECT_FLOAT_EQ(listed.base.sampling.temperature, 0.7f);
  EXPECT_EQ(parse(c, {{"prompt", "x"}}).base.sampling.mirostat, 0);
}

TEST(NativeApi, DryTakesLlamaServersFieldsAndFollowsTheSamplersList) {
  const auto c = NativeEndpoint::Completion;
  const json body = {{"prompt", "x"},
                     {"dry_multiplier", 0.8},
                     {"dry_base", 2},
                     {"dry_allowed_length", 3},
                     {"dry_penalty_last_n", 64},
                     {"dry_sequence_breakers", {"\n", "###"}}};
  const auto r = parse(c, body);
  const DryParams& d = r.base.penalties.dry;
  EXPECT_FLOAT_EQ(d.multiplier, 0.8f);
  EXPECT_FLOAT_EQ(d.base, 2.0f);
  EXPECT_EQ(d.allowed_length, 3);
  EXPECT_EQ(d.penalty_last_n, 64);
  EXPECT_EQ(d.sequence_breakers, (std::vector<std::string>{"\n", "###"}));
  EXPECT_EQ(r.base.samplers.front(), "dry");
  // Defaults: llama-server's breakers; off unless the multiplier is set.
  const auto plain = parse(c, {{"prompt", "x"}});
  EXPECT_FALSE(plain.base.penalties.dry.active());
  EXPECT_EQ(plain.base.penalties.dry.sequence_breakers,
            (std::vector<std::string>{"\n", ":", "\"", "*"}));
  json listed = body;
  listed["samplers"] = {"top_k"};
  EXPECT_FALSE(parse(c, listed).base.penalties.dry.active());
}

TEST(NativeApi, StopTypesAndResponseFields) {
  GenerationResult r;
  r.finish = FinishReason::EndOfGeneration;
  EXPECT_STREQ(native_stop_type(r), "eos");
  r.finish = FinishReason::Stop;
  r.stop_text = "\n\n";
  EXPECT_STREQ(native_stop_type(r), "word");
  r.stop_text = "";  // n_indent
  EXPECT_STREQ(native_stop_type(r), "limit");
  r.finish = FinishReason::ContextFull;
  EXPECT_STREQ(native_stop_type(r), "limit");

  const json doc = {{"content", "x"}, {"timings", {{"predicted_n", 3}}}, {"stop", true}};
  EXPECT_EQ(select_response_fields(doc, {}), doc);
  EXPECT_EQ(select_response_fields(doc, {"content", "timings/predicted_n", "missing", "stop/x"}),
            (json{{"content", "x"}, {"predicted_n", 3}}));
}

TEST(NativeApi, PropsAndSlotsInLlamaServersShape) {
  ModelFacts facts;
  facts.file = "/models/m.gguf";
  facts.context = 2048;
  facts.chat_template = "{{ messages }}";
  facts.tools = true;
  ServerProps p;
  p.model = &facts;
  p.alias = "m";
  p.settings = {{"n_ctx", 2048}, {"n_predict", -1}, {"temperature", 0.8}};
  p.n_slots = 2;
  p.speculative = true;
  p.eos_token = "<|im_end|>";
  const json props = props_json(p);
  EXPECT_EQ(props["default_generation_settings"]["n_ctx"], 2048);
  EXPECT_EQ(props["default_generation_settings"]["params"]["temperature"], 0.8);
  EXPECT_EQ(props["default_generation_settings"]["speculative"], true);
  EXPECT_EQ(props["total_slots"], 2);
  EXPECT_EQ(props["model_alias"], "m");
  EXPECT_EQ(props["model_path"], "/models/m.gguf");
  EXPECT_EQ(props["chat_template"], "{{ messages }}");
  EXPECT_EQ(props["chat_template_caps"]["supports_tools"], true);
  EXPECT_EQ(props["chat_template_caps"]["supports_thinking"], false);
  EXPECT_EQ(props["modalities"], json({{"vision", false}, {"audio", false}}));
  EXPECT_EQ(props["eos_token"], "<|im_end|>");
  EXPECT_EQ(props["endpoint_props"], false);  // settings are per request here

  GenerationQueue::SlotState busy;
  busy.processing = true;
  busy.task = 7;
  busy.prompt_tokens = 12;
  busy.options.max_tokens = 64;
  busy.options.sampling.temperature = 0;
  busy.options.ignore_eos = true;
  busy.decoded = 5;
  GenerationQueue::SlotState idle;
  idle.task = 3;  // ran task 3 last
  const std::vector<GenerationQueue::SlotState> states = {idle, busy};
  const json slots = slots_json(p, states);
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_EQ(slots[0]["id"], 0);
  EXPECT_EQ(slots[0]["id_task"], -1);
  EXPECT_EQ(slots[0]["is_processing"], false);
  EXPECT_FALSE(slots[0].contains("n_prompt_tokens"));
  EXPECT_EQ(slots[0]["params"]["n_predict"], -1);
  EXPECT_EQ(slots[1]["id"], 1);
  EXPECT_EQ(slots[1]["id_task"], 7);
  EXPECT_EQ(slots[1]["is_processing"], true);
  EXPECT_EQ(slots[1]["n_prompt_tokens"], 12);
  EXPECT_EQ(slots[1]["params"]["n_predict"], 64);
  EXPECT_EQ(slots[1]["params"]["temperature"], 0.0);  // the request's, not the defaults
  EXPECT_EQ(slots[1]["params"]["ignore_eos"], true);
  EXPECT_EQ(slots[1]["n_ctx"], 2048);
  EXPECT_EQ(slots[1]["next_token"],
            json::parse(R"([{"has_next_token": true, "n_remain": 59, "n_decoded": 5}])"));
  EXPECT_FALSE(slots[0].contains("next_token"));
  busy.options.max_tokens = -1;  // no budget: nothing remains to count
  EXPECT_EQ(slots_json(p, std::vector{busy})[0]["next_token"][0]["n_remain"], -1);
  // Each adapter at the scale the request runs it at (none loaded: an empty list).
  EXPECT_EQ(slots[1]["params"]["lora"], json::array());
  busy.options.lora_scales = std::vector<float>{0.5f, 0.0f};
  EXPECT_EQ(slots_json(p, std::vector{busy})[0]["params"]["lora"],
            json::parse(R"([{"id": 0, "scale": 0.5}, {"id": 1, "scale": 0.0}])"));
}

}  // namespace
}  // namespace specdec::server
