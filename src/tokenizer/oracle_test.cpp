// Agreement with llama.cpp on real vocabularies: tests/fixtures/tokenizer_<model>.json holds
// llama-cpp-python's ids for a fixed set of strings (scripts/oracle/gen_tokenizer_fixtures.py).
// The model files are large, so the test skips when they are not in the model cache.
// SmolLM2 (BPE, pre-tokenizer smollm), Gemma 3 (SentencePiece) and the Qwen2.5-Coder vocabulary
// (BPE, pre-tokenizer qwen2; ~340 strings incl. invalid UTF-8 and llama.cpp's detokenization).
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace specdec {
namespace {

namespace fs = std::filesystem;

fs::path models_dir() {
  if (const char* env = std::getenv("SPECDEC_MODELS"); env && *env) return env;
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : "/") / ".cache/specdec/models";
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

std::string escape(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20) {
      out += "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

class TokenizerOracle : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerOracle, MatchesLlamaCpp) {
  const char* src = std::getenv("SPECDEC_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "SPECDEC_SOURCE_DIR is not set (CTest sets it)";
  const fs::path fixture =
      fs::path(src) / "tests/fixtures" / (std::string("tokenizer_") + GetParam() + ".json");
  std::ifstream in(fixture);
  ASSERT_TRUE(in) << "missing fixture " << fixture;
  const nlohmann::json doc = nlohmann::json::parse(in);
  const fs::path model = models_dir() / doc.at("model").get<std::string>();
  if (!fs::exists(model)) {
    GTEST_SKIP() << model << " not found (run scripts/fetch-models.sh, or set SPECDEC_MODELS)";
  }
  const auto file = gguf::GgufFile::open(model.string());
  const Tokenizer tok = Tokenizer::from_gguf(*file);

  EXPECT_EQ(tok.n_vocab(), doc.at("n_vocab").get<int32_t>());
  EXPECT_EQ(tok.bos(), doc.at("bos").get<int32_t>());
  EXPECT_EQ(tok.eos(), doc.at("eos").get<int32_t>());
  EXPECT_EQ(tok.add_bos(), doc.at("add_bos").get<bool>());
  // (EOT itself is not compared: when the file does not name it, llama.cpp picks whichever
  // candidate text its hash map yields first; we prefer <|im_end|> over <|endoftext|>.)
  EXPECT_EQ(tok.eog_ids(), doc.at("eog").get<std::vector<int32_t>>());

  int matched = 0, total = 0, round_trips = 0;
  for (const auto& c : doc.at("cases")) {
    // Bytes that are not valid UTF-8 cannot be a JSON string; such cases give them in hex.
    const std::string text =
        c.contains("text_hex") ? from_hex(c.at("text_hex")) : c.at("text").get<std::string>();
    const bool add_special = c.at("add_special"), parse_special = c.at("parse_special");
    const auto expected = c.at("ids").get<std::vector<int32_t>>();
    const auto got = tok.encode(text, add_special, parse_special);
    ++total;
    if (got == expected) {
      ++matched;
    } else {
      ADD_FAILURE() << "encode mismatch for \"" << escape(text) << "\" add_special=" << add_special
                    << " parse_special=" << parse_special << "\n  expected "
                    << ::testing::PrintToString(expected) << "\n  got      "
                    << ::testing::PrintToString(got);
    }
    if (c.contains("detok_hex")) {
      // llama.cpp's own detokenization of its ids: ours must be the same bytes, whether or not
      // they give the input back (invalid UTF-8 comes back as U+FFFD in both; control tokens
      // come back as nothing unless rendered).
      const std::string detok = from_hex(c.at("detok_hex"));
      EXPECT_EQ(tok.decode(got), detok) << "decode of \"" << escape(text) << "\"";
      if (detok == text) {
        EXPECT_EQ(tok.decode(got), text) << "round trip of \"" << escape(text) << "\"";
        ++round_trips;
      }
    } else if (!parse_special && !add_special) {
      EXPECT_EQ(tok.decode(got), text) << "round trip of \"" << escape(text) << "\"";
    }
  }
  for (const auto& [id, hex] : doc.at("pieces_hex").items()) {
    EXPECT_EQ(tok.token_bytes(std::stoi(id)), from_hex(hex)) << "token " << id;
  }
  std::cout << "[ oracle   ] " << GetParam() << ": " << matched << "/" << total
            << " strings match llama.cpp";
  if (round_trips > 0) std::cout << ", " << round_trips << " round-trip like llama.cpp's";
  std::cout << "\n";
}

INSTANTIATE_TEST_SUITE_P(Models, TokenizerOracle,
                         ::testing::Values("smollm2", "gemma3", "qwen2.5-coder"),
                         [](const auto& info) {
                           std::string name = info.param;  // gtest names: alphanumerics only
                           std::erase_if(name, [](unsigned char ch) { return !std::isalnum(ch); });
                           return name;
                         });

// The fixture is the 0.5B's vocabulary; the 1.5B target must have the very same one (token texts,
// types, merges, special ids, pre-tokenizer), or the fixture would not vouch for it and
// speculative decoding between the two would be refused.
TEST(TokenizerOracleQwen, Coder15BSharesThe05BVocabulary) {
  const fs::path small = models_dir() / "qwen2.5-coder-0.5b-instruct.gguf";
  const fs::path large = models_dir() / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
  for (const auto& m : {small, large}) {
    if (!fs::exists(m)) GTEST_SKIP() << m << " not found (run scripts/fetch-models.sh)";
  }
  const auto fa = gguf::GgufFile::open(small.string());
  const auto fb = gguf::GgufFile::open(large.string());
  for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.merges"}) {
    EXPECT_TRUE(fa->get_array(key).strings == fb->get_array(key).strings) << key;
  }
  EXPECT_TRUE(fa->get_array("tokenizer.ggml.token_type").ints ==
              fb->get_array("tokenizer.ggml.token_type").ints);
  const Tokenizer a = Tokenizer::from_gguf(*fa), b = Tokenizer::from_gguf(*fb);
  EXPECT_EQ(a.n_vocab(), 151936);
  EXPECT_EQ(a.n_vocab(), b.n_vocab());
  EXPECT_EQ(a.pre(), "qwen2");
  EXPECT_EQ(a.pre(), b.pre());
  EXPECT_EQ(a.bos(), b.bos());
  EXPECT_EQ(a.eos(), b.eos());
  EXPECT_EQ(a.add_bos(), b.add_bos());
  EXPECT_EQ(a.eog_ids(), b.eog_ids());
}

// The chat template of a real model renders through to the tokens the model expects.
TEST(TokenizerOracleChat, SmolLM2TemplateIsChatMLWithDefaultSystem) {
  const fs::path model = models_dir() / "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!fs::exists(model)) GTEST_SKIP() << model << " not found";
  const auto file = gguf::GgufFile::open(model.string());
  const ChatTemplate t = ChatTemplate::from_gguf(*file);
  EXPECT_EQ(t.format(), ChatFormat::ChatML);
  EXPECT_EQ(t.default_system(),
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  const Tokenizer tok = Tokenizer::from_gguf(*file);
  const std::vector<ChatMessage> msgs = {{"user", "Hi"}};
  const auto ids = encode_prompt(tok, t.apply(msgs, true));
  EXPECT_EQ(ids.front(), *tok.find_token("<|im_start|>"));
  EXPECT_TRUE(tok.is_eog(*tok.find_token("<|im_end|>")));
}

}  // namespace
}  // namespace specdec
