// Origins of streamed text: the TextOrigins queue on its own, then whole generations on tiny
// models, where the pieces must concatenate to the result's text and carry, byte for byte, the
// origin of the token that released them from the UTF-8 decoder (the rule in text_origins.h).
#include "engine/text_origins.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/engine.h"
#include "support/tiny_model.h"

namespace specdec {
namespace {

struct Piece {
  std::string text;
  TokenOrigin origin;
};

TEST(TextOrigins, ReleasesRunsOfOneOriginAcrossChunkBoundaries) {
  TextOrigins q;
  q.append(3, TokenOrigin::Draft);
  q.append(2, TokenOrigin::Draft);  // merges with the run before
  q.append(0, TokenOrigin::Bonus);  // nothing
  q.append(4, TokenOrigin::Correction);
  EXPECT_EQ(q.held(), 9u);
  std::vector<Piece> got;
  auto emit = [&](std::string_view t, TokenOrigin o) { got.push_back({std::string(t), o}); };
  q.release("abcdefg", emit);  // crosses from the draft run into the correction run
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].text, "abcde");
  EXPECT_EQ(got[0].origin, TokenOrigin::Draft);
  EXPECT_EQ(got[1].text, "fg");
  EXPECT_EQ(got[1].origin, TokenOrigin::Correction);
  EXPECT_EQ(q.held(), 2u);
  got.clear();
  q.append(1, TokenOrigin::Bonus);
  q.release("hij", emit);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].text, "hi");
  EXPECT_EQ(got[0].origin, TokenOrigin::Correction);
  EXPECT_EQ(got[1].text, "j");
  EXPECT_EQ(got[1].origin, TokenOrigin::Bonus);
  EXPECT_EQ(q.held(), 0u);
}

// The byte-level origins the rule gives: each token's decoder output takes its origin.
std::vector<TokenOrigin> reference_byte_origins(const Tokenizer& tok, const GenerationResult& r,
                                                bool ignore_eos) {
  StreamingDecoder dec(tok);
  std::vector<TokenOrigin> out;
  TokenOrigin last = TokenOrigin::Target;
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    if (!ignore_eos && tok.is_eog(r.tokens[i])) break;
    last = r.origins[i];
    out.insert(out.end(), dec.push(r.tokens[i]).size(), last);
  }
  out.insert(out.end(), dec.finish().size(), last);
  return out;
}

class EngineOrigins : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::TinyModelSpec spec;
    spec.n_ctx = 256;
    target_ = new LoadedModel(
        LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("t.gguf"))));
    spec.seed = 2;
    spec.n_layer = 1;
    draft_ = new LoadedModel(
        LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("d.gguf"))));
  }
  static void TearDownTestSuite() {
    delete target_;
    delete draft_;
  }

  // Runs a generation, checks pieces against text and tokens, returns the result.
  GenerationResult check(Engine& engine, const GenerationOptions& go) {
    std::vector<Piece> pieces;
    const std::vector<int32_t> prompt = engine.tokenize_prompt("hello there");
    GenerationResult r = engine.generate_pieces(prompt, go, [&](std::string_view t, TokenOrigin o) {
      EXPECT_FALSE(t.empty());
      pieces.push_back({std::string(t), o});
      return true;
    });
    EXPECT_EQ(r.origins.size(), r.tokens.size());
    std::string joined;
    std::vector<TokenOrigin> byte_origins;
    for (const Piece& p : pieces) {
      joined += p.text;
      byte_origins.insert(byte_origins.end(), p.text.size(), p.origin);
    }
    EXPECT_EQ(joined, r.text);
    // A stop string cuts the text: the pieces are a prefix of the uncut attribution.
    const std::vector<TokenOrigin> want =
        reference_byte_origins(engine.tokenizer(), r, go.ignore_eos);
    EXPECT_LE(byte_origins.size(), want.size());
    EXPECT_TRUE(std::equal(byte_origins.begin(), byte_origins.end(), want.begin()));
    // The counts of each kind are the decoder's counters (no end token cuts a round here).
    const OriginCounts c = count_origins(r.origins);
    const DecodeStats& s = r.stats.spec;
    EXPECT_EQ(c.total(), r.stats.generated_tokens);
    EXPECT_EQ(c.target, s.baseline_steps);
    EXPECT_EQ(c.draft, s.accepted);
    EXPECT_EQ(c.correction, s.corrections);
    EXPECT_EQ(c.bonus, s.bonus);
    return r;
  }

  static GenerationOptions options(float temp, DrafterKind kind, int gamma) {
    GenerationOptions go;
    go.max_tokens = 60;
    go.sampling.temperature = temp;
    go.sampling.seed = 5;
    go.ignore_eos = true;
    go.drafter = kind;
    go.draft_max = gamma;
    return go;
  }

  static LoadedModel* target_;
  static LoadedModel* draft_;
};
LoadedModel* EngineOrigins::target_ = nullptr;
LoadedModel* EngineOrigins::draft_ = nullptr;

TEST_F(EngineOrigins, DraftModelRunsAttributeEveryByte) {
  EngineOptions eo;
  eo.n_ctx = 256;
  Engine engine(*target_, draft_, eo);
  for (float temp : {0.0f, 1.0f}) {
    const GenerationResult r = check(engine, options(temp, DrafterKind::Model, 3));
    const OriginCounts c = count_origins(r.origins);
    EXPECT_EQ(c.total(), 60);
    EXPECT_GT(c.correction + c.bonus, 0);
  }
}

TEST_F(EngineOrigins, TargetOnlyAndPromptLookupRuns) {
  EngineOptions eo;
  eo.n_ctx = 256;
  Engine plain(*target_, nullptr, eo);
  GenerationOptions go = options(0.0f, DrafterKind::Model, 3);
  go.speculative = false;
  const GenerationResult r = check(plain, go);
  EXPECT_EQ(count_origins(r.origins).target, 60);
  // Prompt lookup: whatever it proposes and gets accepted counts as drafts.
  check(plain, options(0.0f, DrafterKind::Ngram, 4));
}

// A plain text callback still gets each released chunk whole: the pieces of the same run,
// joined, in order.
TEST_F(EngineOrigins, TextCallbacksGetWholeChunks) {
  EngineOptions eo;
  eo.n_ctx = 256;
  Engine engine(*target_, draft_, eo);
  GenerationOptions go = options(1.0f, DrafterKind::Model, 4);
  const std::vector<int32_t> prompt = engine.tokenize_prompt("hello there");
  std::vector<std::string> chunks, pieces;
  const GenerationResult a = engine.generate(prompt, go, [&](std::string_view t) {
    chunks.emplace_back(t);
    return true;
  });
  const GenerationResult b =
      engine.generate_pieces(prompt, go, [&](std::string_view t, TokenOrigin) {
        pieces.emplace_back(t);
        return true;
      });
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.origins, b.origins);
  EXPECT_LE(chunks.size(), pieces.size());
  size_t p = 0;
  for (const std::string& c : chunks) {
    std::string joined;
    while (joined.size() < c.size() && p < pieces.size()) joined += pieces[p++];
    EXPECT_EQ(joined, c);
  }
  EXPECT_EQ(p, pieces.size());
}

TEST_F(EngineOrigins, StopStringsKeepTheAttribution) {
  EngineOptions eo;
  eo.n_ctx = 256;
  Engine engine(*target_, draft_, eo);
  GenerationOptions go = options(0.0f, DrafterKind::Model, 4);
  const GenerationResult all = check(engine, go);
  ASSERT_GE(all.text.size(), 12u);
  // A stop string from the middle of the text: held back while it could match, then cut.
  go.stop = {all.text.substr(all.text.size() / 2, 3)};
  const GenerationResult cut = check(engine, go);
  EXPECT_EQ(cut.finish, FinishReason::Stop);
  EXPECT_EQ(cut.text, all.text.substr(0, all.text.find(go.stop[0])));
}

}  // namespace
}  // namespace specdec
