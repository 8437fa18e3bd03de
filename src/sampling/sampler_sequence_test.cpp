#include "sampling/sampler_sequence.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"

namespace specdec {
namespace {

using Names = std::vector<std::string>;

// llama-server's /completion defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05.
SamplingParams server_defaults() {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  return p;
}

// The message of the Error apply_sampler_sequence throws, or "" when it accepts the sequence.
std::string refusal(const Names& sequence, SamplingParams p = server_defaults(),
                    PenaltyParams penalties = {}) {
  try {
    apply_sampler_sequence(sequence, p, penalties);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SamplerSequence, NamesAndLettersMapToTheCanonicalStages) {
  EXPECT_EQ(canonical_sampler_name("nucleus"), "top_p");
  EXPECT_EQ(canonical_sampler_name("top-k"), "top_k");
  EXPECT_EQ(canonical_sampler_name("typical"), "typ_p");
  EXPECT_EQ(canonical_sampler_name("temp"), "temperature");
  EXPECT_EQ(canonical_sampler_name("top-n-sigma"), "top_n_sigma");
  EXPECT_EQ(canonical_sampler_name("infill"), "");
  EXPECT_EQ(canonical_sampler_name("tfs_z"), "");
  EXPECT_EQ(sampler_names_of_letters("edskypmxt"), default_sampler_sequence());
  EXPECT_EQ(sampler_names_of_letters("k?t"), (Names{"top_k", "temperature"}));
}

TEST(SamplerSequence, TheDefaultSequencePutsTheTemperatureLast) {
  SamplingParams p = server_defaults();
  PenaltyParams pen;
  pen.repetition_penalty = 1.1f;
  EXPECT_EQ(apply_sampler_sequence(default_sampler_sequence(), p, pen),
            (Names{"penalties", "top_k", "top_p", "min_p", "temperature"}));
  EXPECT_TRUE(p.temperature_last);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_FLOAT_EQ(pen.repetition_penalty, 1.1f);
}

TEST(SamplerSequence, TheTemperatureFirstSamplesAfterIt) {
  SamplingParams p = server_defaults();
  PenaltyParams pen;
  EXPECT_EQ(apply_sampler_sequence({"temperature", "top_k", "top_p", "min_p"}, p, pen),
            (Names{"temperature", "top_k", "top_p", "min_p"}));
  EXPECT_FALSE(p.temperature_last);
  // top-k and top-n-sigma do not measure probabilities: the temperature may stand between them
  // and the filters that do.
  p = server_defaults();
  p.top_n_sigma = 2.0f;
  apply_sampler_sequence({"top_n_sigma", "top_k", "temperature", "top_p", "min_p"}, p, pen);
  EXPECT_FALSE(p.temperature_last);
}

TEST(SamplerSequence, StagesLeftOutAreOff) {
  SamplingParams p = server_defaults();
  p.typical_p = 0.9f;
  p.xtc_probability = 0.5f;
  p.dynatemp_range = 0.3f;
  PenaltyParams pen;
  pen.presence_penalty = 0.5f;
  pen.dry.multiplier = 0.8f;
  EXPECT_EQ(apply_sampler_sequence({"top_k"}, p, pen), (Names{"top_k"}));
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.top_p, 1.0f);
  EXPECT_FLOAT_EQ(p.min_p, 0.0f);
  EXPECT_FLOAT_EQ(p.typical_p, 1.0f);
  EXPECT_FLOAT_EQ(p.xtc_probability, 0.0f);
  EXPECT_FLOAT_EQ(p.temperature, 1.0f);  // no temperature stage: sampled at 1
  EXPECT_FLOAT_EQ(p.dynatemp_range, 0.0f);
  EXPECT_FLOAT_EQ(pen.presence_penalty, 0.0f);
  EXPECT_FLOAT_EQ(pen.dry.multiplier, 0.0f);
  // Greedy stays greedy; Mirostat keeps its temperature.
  p = server_defaults();
  p.temperature = 0.0f;
  apply_sampler_sequence({"top_k"}, p, pen);
  EXPECT_FLOAT_EQ(p.temperature, 0.0f);
  p = server_defaults();
  p.mirostat = 2;
  apply_sampler_sequence({"top_k"}, p, pen);
  EXPECT_FLOAT_EQ(p.temperature, 0.8f);
}

TEST(SamplerSequence, RepeatedAndUnknownStagesCountOnce) {
  SamplingParams p = server_defaults();
  PenaltyParams pen;
  EXPECT_EQ(apply_sampler_sequence({"top_k", "", "top_k", "temperature", "top_p"}, p, pen),
            (Names{"top_k", "temperature", "top_p"}));
  EXPECT_FALSE(p.temperature_last);
}

TEST(SamplerSequence, OrdersTheEngineDoesNotApplyAreRefused) {
  // Filters out of the default order.
  EXPECT_NE(refusal({"top_p", "top_k", "temperature"}).find("top_k after top_p"),
            std::string::npos);
  EXPECT_NE(refusal({"min_p", "top_p"}).find("top_p after min_p"), std::string::npos);
  // The temperature between two filters that measure probabilities.
  EXPECT_NE(refusal({"top_k", "top_p", "temperature", "min_p"})
                .find("temperature between top_p and min_p"),
            std::string::npos);
  // The temperature before presence penalties or DRY, which subtract from the logits.
  PenaltyParams presence;
  presence.presence_penalty = 0.5f;
  EXPECT_NE(refusal({"temperature", "penalties", "top_k"}, server_defaults(), presence)
                .find("temperature before penalties"),
            std::string::npos);
  PenaltyParams dry;
  dry.dry.multiplier = 0.8f;
  EXPECT_NE(refusal({"temperature", "dry"}, server_defaults(), dry).find("before dry"),
            std::string::npos);
  // A repetition penalty divides the logits: it commutes with the temperature.
  PenaltyParams repetition;
  repetition.repetition_penalty = 1.2f;
  EXPECT_EQ(refusal({"temperature", "penalties", "top_k"}, server_defaults(), repetition), "");
  // Only stages that act count: an out-of-order stage that is off changes nothing.
  SamplingParams no_top_p = server_defaults();
  no_top_p.top_p = 1.0f;
  EXPECT_EQ(refusal({"top_p", "top_k", "temperature"}, no_top_p), "");
  // Under Mirostat the list's order does not matter (llama.cpp's chain is Mirostat's).
  SamplingParams mirostat = server_defaults();
  mirostat.mirostat = 1;
  EXPECT_EQ(refusal({"top_p", "top_k", "temperature"}, mirostat), "");
}

}  // namespace
}  // namespace specdec
