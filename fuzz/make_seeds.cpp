// Writes the seed corpus of every fuzz target: fuzz_make_seeds DIR fills DIR/<target>/ (the
// committed fuzz/corpus was made by `build/fuzz/fuzz_make_seeds fuzz/corpus`). GGUF seeds are
// tiny complete models from tests/support/tiny_model (llama, qwen2 and gemma3; F32, F16, Q8_0
// and Q4_0 weights; ChatML, Llama 3 and Gemma templates) and vocabulary-only files written by
// GgufWriter; the text targets get a few hand-written inputs in their formats (see the comment
// at the top of each fuzz/<target>_fuzzer.cpp). Every file stays well under 64 KiB. The GGUF
// seeds have no .gguf extension because the repository's .gitignore ignores *.gguf.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/slot_file.h"
#include "fuzz_support.h"
#include "gguf/gguf_writer.h"
#include "support/tiny_model.h"

namespace fs = std::filesystem;
using specdec::GgmlType;
using specdec::gguf::GgufWriter;
using specdec::testing::TinyModelSpec;

namespace {

constexpr size_t kMaxSeedBytes = 64 * 1024;

void put(const fs::path& dir, const std::string& name, const std::string& bytes) {
  if (bytes.size() >= kMaxSeedBytes) specdec::fail(name, ": ", bytes.size(), " bytes is too big");
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary).write(bytes.data(), std::ssize(bytes));
  std::printf("%s (%zu bytes)\n", (dir / name).c_str(), bytes.size());
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string bytes(const std::vector<uint8_t>& v) { return {v.begin(), v.end()}; }

// NUL-separated fields after a flag byte (the text targets' input format).
std::string fields(uint8_t flags, std::initializer_list<std::string_view> parts) {
  std::string out(1, static_cast<char>(flags));
  bool first = true;
  for (std::string_view p : parts) {
    if (!first) out += '\0';
    out += p;
    first = false;
  }
  return out;
}

constexpr const char* kLlama3Template =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
constexpr const char* kGemmaTemplate =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'assistant') %}"
    "{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}";
constexpr const char* kSmolTemplate =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM<|im_end|>\\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";
constexpr const char* kPhi3Template =
    "{% for message in messages %}{{'<|' + message['role'] + '|>' + '\\n' + message['content'] "
    "+ '<|end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}"
    "{% endif %}";
constexpr const char* kZephyrTemplate =
    "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + "
    "eos_token + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}"
    "{% endif %}";
constexpr const char* kLlama2Template =
    "{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + "
    "messages[0]['content'] | trim + '\\n<</SYS>>\\n\\n' %}{% endif %}{% for message in messages "
    "%}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content | trim + ' [/INST]' "
    "}}{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] | trim + ' ' + "
    "eos_token }}{% endif %}{% endfor %}";

void gguf_seeds(const fs::path& dir) {
  const fs::path tmp = fs::temp_directory_path() / "specdec_fuzz_seed.gguf";
  auto model = [&](const std::string& name, TinyModelSpec spec) {
    spec.n_vocab = 269;  // the tiny vocabulary's built-in tokens, no padding
    spec.n_layer = 1;
    spec.n_head = 2;
    spec.n_head_kv = 1;
    spec.n_ctx = 64;
    spec.tied = true;
    specdec::testing::write_tiny_model(spec, tmp.string());
    put(dir, name, read(tmp));
  };
  {
    TinyModelSpec s;
    s.n_embd = 8;
    s.n_ff = 16;
    model("tiny_llama_f32", s);
  }
  {
    TinyModelSpec s;
    s.arch = "qwen2";
    s.n_embd = 8;
    s.n_ff = 16;
    s.weight_type = GgmlType::F16;
    s.edit = [](GgufWriter& w) { w.set_string("tokenizer.chat_template", kSmolTemplate); };
    model("tiny_qwen2_f16", s);
  }
  {
    TinyModelSpec s;
    s.arch = "gemma3";
    s.n_embd = 32;
    s.n_ff = 32;
    s.weight_type = GgmlType::Q8_0;
    s.edit = [](GgufWriter& w) { w.set_string("tokenizer.chat_template", kGemmaTemplate); };
    model("tiny_gemma3_q8_0", s);
  }
  {
    TinyModelSpec s;
    s.n_embd = 32;
    s.n_ff = 32;
    s.weight_type = GgmlType::Q4_0;
    s.edit = [](GgufWriter& w) { w.set_string("tokenizer.chat_template", kLlama3Template); };
    model("tiny_llama_q4_0", s);
  }
  fs::remove(tmp);

  // A few keys of every type and two tensors (as in src/gguf/gguf_test_util.h), version 2.
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_f32("llama.rope.freq_base", 10000.0f);
  w.set_i8("x.i8", -3);
  w.set_u16("x.u16", 65535);
  w.set_i64("x.i64", -1);
  w.set_f64("x.f64", 0.5);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_array_f32("x.floats", {1.5f, -2.0f});
  w.set_array_bool("x.bools", {true, false});
  w.set_array_u64("x.u64s", {1, ~uint64_t{0}});
  w.set_alignment(64);
  std::vector<uint8_t> q8(2 * 2 * 34), f32(8 * 4);
  for (size_t i = 0; i < q8.size(); ++i) q8[i] = static_cast<uint8_t>(1 + i * 7);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = static_cast<uint8_t>(9 + i * 7);
  w.add_tensor("tok.weight", {64, 2}, GgmlType::Q8_0, q8);
  w.add_tensor("norm.weight", {8}, GgmlType::F32, f32);
  put(dir, "small_v2", bytes(w.to_bytes(2)));

  // A SentencePiece vocabulary and a Llama 2 template, no tensors.
  GgufWriter spm;
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
    scores.push_back(0);
    types.push_back(6);
  }
  for (const char* p : {"\xE2\x96\x81", "h", "e", "l", "o", "he", "ll", "llo", "hello",
                        "\xE2\x96\x81hello", "\xC3\xA9"}) {
    tokens.push_back(p);
    scores.push_back(-static_cast<float>(tokens.size()));
    types.push_back(1);
  }
  spm.set_string("tokenizer.ggml.model", "llama");
  spm.set_array_strings("tokenizer.ggml.tokens", tokens);
  spm.set_array_f32("tokenizer.ggml.scores", scores);
  spm.set_array_i32("tokenizer.ggml.token_type", types);
  spm.set_u32("tokenizer.ggml.bos_token_id", 1);
  spm.set_u32("tokenizer.ggml.eos_token_id", 2);
  spm.set_string("tokenizer.chat_template", kLlama2Template);
  put(dir, "spm_vocab", bytes(spm.to_bytes()));
}

void tokenizer_seeds(const fs::path& dir) {
  // flags: vocab in bits 0-2, add_special 8, parse_special 16, extend 32.
  put(dir, "bpe_default_hello", fields(0, {"Hello world, 123 abc  hello!"}));
  put(dir, "bpe_gpt2_specials", fields(1 | 16, {"<|im_start|>user\nhi<|im_end|><tool>x"}));
  put(dir, "bpe_smollm_digits", fields(2 | 8, {"12345 6789 caf\xC3\xA9 'll 've"}));
  put(dir, "bpe_llama3_unicode",
      fields(3 | 8 | 16, {"<|begin_of_text|>\xE4\xB8\x80\xE4\xBA\x8C \xF0\x9F\x98\x80\r\n\tz"}));
  put(dir, "bpe_qwen2_invalid", fields(4, {"ab\xC3(\xE2\x82\xFF\xF0\x9F\x98 end"}));
  put(dir, "spm_hello", fields(5 | 8, {"hello world  \xC3\xA9\xE2\x96\x81x"}));
  put(dir, "spm_specials", fields(6 | 8 | 16, {"<s>hello</s> <unk><start_of_turn>model"}));
  put(dir, "bpe_extended",
      fields(1 | 32 | 16, {"3<|user|>\n4<x>\n1wor\n0\n6<0x41>", "w o\nwo r\nbad", "wor <x> w"}));
  put(dir, "spm_extended", fields(5 | 32, {"1hel\n1lo w\n3</s>", "", "hello world"}));
}

void chat_seeds(const fs::path& dir) {
  // flags: template in bits 0-2 (0-5 fixed formats, 6-7 detect), gen 8, special texts 16,
  // vocab in bits 5-7.
  auto with = [](std::string_view tpl, std::string_view bos, std::string_view eos) {
    std::vector<std::string_view> v = {tpl,         bos,    eos,           "system",
                                       "Be brief.", "user", "  Hello!  ",  "assistant",
                                       "Hi.",       "user", "caf\xC3\xA9?"};
    return v;
  };
  auto join = [](uint8_t flags, const std::vector<std::string_view>& v) {
    std::string out(1, static_cast<char>(flags));
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += '\0';
      out += v[i];
    }
    return out;
  };
  put(dir, "detect_smollm", join(6 | 8 | (4 << 5), with(kSmolTemplate, "", "")));
  put(dir, "detect_llama3",
      join(6 | 8 | 16 | (3 << 5), with(kLlama3Template, "<|begin_of_text|>", "<|eot_id|>")));
  put(dir, "detect_gemma", join(7 | 8 | 16 | (5 << 5), with(kGemmaTemplate, "<s>", "</s>")));
  put(dir, "detect_llama2", join(6 | 16 | (6 << 5), with(kLlama2Template, "<s>", "</s>")));
  put(dir, "detect_phi3", join(6 | 8 | (1 << 5), with(kPhi3Template, "", "")));
  put(dir, "detect_zephyr", join(6 | 8 | 16, with(kZephyrTemplate, "", "<|endoftext|>")));
  put(dir, "chatml_fixed", join(0 | 8 | (2 << 5), with("", "", "")));
  put(dir, "gemma_system_only", join(3, {"", "", "", "system", "only a system prompt"}));
  put(dir, "zephyr_odd_roles",
      join(4 | 8, {"", "", "", "<|im_end|>", "<|im_start|>", "tool", "", "user"}));
}

void request_seeds(const fs::path& dir) {
  // flags: chat endpoint 1, context size in bits 1-3, Llama 3 template 16, stop feeding in
  // bits 5-7.
  auto req = [](uint8_t flags, std::string_view body) {
    std::string out(1, static_cast<char>(flags));
    out.append(body);  // (not operator+: GCC 12 warns falsely, -Wrestrict)
    return out;
  };
  put(dir, "completion_basic",
      req(5 << 1, R"({"model":"tiny-model","prompt":"Once upon a time","max_tokens":16})"));
  put(dir, "completion_sampling",
      req((4 << 1) | (2 << 5),
          R"({"prompt":["hello world, hello"],"temperature":0.7,"top_p":0.9,"top_k":40,)"
          R"("min_p":0.05,"seed":42,"stop":["wor","\n\n"],"n":1,"best_of":1,"echo":false,)"
          R"("logprobs":null,"stream":true,"stream_options":{"include_usage":true}})"));
  put(dir, "completion_extensions",
      req((6 << 1) | (7 << 5),
          R"({"prompt":"abc abd","speculative":false,"draft_max":4,"ignore_eos":true,)"
          R"("temperature":0,"stop":"bd","user":"x","presence_penalty":0.5})"));
  put(dir, "chat_basic",
      req(1 | (5 << 1),
          R"({"model":"specdec","messages":[{"role":"system","content":"Be brief."},)"
          R"({"role":"user","content":"Hi!"}],"max_completion_tokens":8,"max_tokens":4})"));
  put(dir, "chat_parts",
      req(1 | (3 << 1) | 16 | (1 << 5),
          R"({"messages":[{"role":"developer","content":[{"type":"text","text":"a"},)"
          R"({"type":"text","text":"b"}]},{"role":"user","content":null},)"
          R"({"role":"assistant","content":"caf\u00e9 \ud83d\ude00"}],"seed":-1,)"
          R"("temperature":2.0,"top_p":0.0,"stop":["\u00e9","x","y"]})"));
  put(dir, "chat_bad_role", req(1, R"({"messages":[{"role":"tool","content":"x"}]})"));
  put(dir, "chat_context_full",
      req(1 | (1 << 1), R"({"messages":[{"role":"user","content":"a long prompt"}]})"));
  put(dir, "bad_json", req(0, R"({"prompt": "unterminated)"));
  put(dir, "bad_types",
      req(0, R"({"prompt":"x","max_tokens":3.5,"temperature":"hot","top_k":1e300})"));
  put(dir, "wrong_model", req(2 << 1, R"({"model":"gpt-4","prompt":"x","n":2})"));
  put(dir, "completion_logprobs",
      req(5 << 1, R"({"prompt":"hello <|endoftext|> caf\u00e9","logprobs":5,"ignore_eos":true})"));
  put(dir, "chat_logprobs",
      req(1 | (5 << 1) | 16,
          R"({"messages":[{"role":"user","content":"hi \u00e9"}],"logprobs":true,)"
          R"("top_logprobs":20})"));
  put(dir, "deep_json",
      req(0, R"({"prompt":"x","stop":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]})"));
}

void http_seeds(const fs::path& dir) {
  // flags: piece size in bits 0-2 (7: all at once), limits in bits 3-4.
  auto http = [](uint8_t flags, std::string_view stream) {
    std::string out(1, static_cast<char>(flags));
    out.append(stream);
    return out;
  };
  put(dir, "get_models", http(7, "GET /v1/models HTTP/1.1\r\nHost: localhost:8080\r\n\r\n"));
  put(dir, "post_pipelined",
      http(3,
           "POST /v1/completions?x=1 HTTP/1.1\r\nContent-Type: application/json\r\n"
           "Content-Length: 16\r\n\r\n{\"prompt\": \"hi\"}GET /health HTTP/1.1\r\n"
           "Connection: close\r\n\r\n"));
  put(dir, "chunked_trailers",
      http(1,
           "POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
           "Expect: 100-continue\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\n"
           "X-Trailer: t\r\n\r\n"));
  put(dir, "http10_keep_alive",
      http(4, "\r\nGET / HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 2, 2\r\n\r\nok"));
  put(dir, "small_limits",
      http(2 | (1 << 3),
           "GET /a HTTP/1.1\r\nA: 1\r\nB: 22\r\n\r\nPOST /b HTTP/1.1\r\n"
           "Content-Length: 40\r\n\r\n0123456789012345678901234567890123456789"));
  put(dir, "smuggling",
      http(5,
           "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"));
  put(dir, "bare_cr_fold", http(6 | (2 << 3), "GET / HTTP/1.1\r\nX: a\rb\r\n folded\r\n\r\n"));
  put(dir, "bad_version", http(0, "GET / HTTP/2.0\r\n\r\nBREW /pot HTCPCP/1.0\r\n\r\n"));
}

void grammar_seeds(const fs::path& dir) {
  // GBNF, then NUL and a text to match (without a NUL the input's last 32 bytes are the text).
  auto gbnf = [](std::string_view grammar, std::string_view text) {
    std::string out(grammar);
    out += '\0';
    out.append(text);
    return out;
  };
  put(dir, "json",
      gbnf(R"(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-7]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)",
           "{\"a\": [1, -2.5e3, \"caf\xC3\xA9 \\u00e9\"], \"b\": {\"c\": null}}"));
  put(dir, "arithmetic",
      gbnf("root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\n"
           "term ::= factor ((\"*\" | \"/\") factor)*\n"
           "factor ::= [0-9]+ | \"(\" ws expr ws \")\"\nws ::= [ \\t]*\n",
           "(1+2)*3-( 4/5 )"));
  put(dir, "unicode_bounds",
      gbnf("root ::= greeting{1,3} [^\\x00-\\x7F]? tail\r\n"
           "greeting ::= (\"h\\u00e9llo\" | [\xE4\xB8\x80-\xE9\xBF\xBF]{2,}) \" \"?\r\n"
           "tail ::= \"\\U0001F600\" | . | \r\n    \"end\"\r\n",
           "h\xC3\xA9llo \xE4\xB8\x80\xE4\xBA\x8C \xF0\x9F\x98\x80"));
  put(dir, "left_recursion", gbnf("root ::= a \"x\"\na ::= b root | \"y\"\nb ::= \"z\"?\n", "yx"));
  put(dir, "ambiguous",
      gbnf("root ::= x \"b\"\nx ::= \"a\" x \"c\" | \"a\" x \"d\" | \"\"\n# doubles per a\n",
           "aaaaaaaaaaaaaaab"));
}

// Slot files (engine/slot_file.h) in each cache type: text with the draft's rows from its start
// and from a context window's base, without a draft section, and empty.
void slot_file_seeds(const fs::path& dir) {
  using specdec::KvCache;
  using specdec::KvType;
  using specdec::KvTypes;
  namespace fz = specdec::fuzz;
  const fs::path tmp = fs::temp_directory_path() / "specdec_fuzz_seed.slot";
  const auto fill = [](KvCache& c, int32_t n) {
    std::vector<float> k(static_cast<size_t>(c.head_dim())), v(k.size());
    for (int32_t l = 0; l < c.n_layer(); ++l) {
      for (int32_t s = 0; s < n; ++s) {
        for (size_t d = 0; d < k.size(); ++d) {
          k[d] = std::sin(static_cast<float>(l * 1000 + s * 40) + static_cast<float>(d));
          v[d] = std::cos(static_cast<float>(l * 700 + s * 30) + static_cast<float>(d));
        }
        c.store(l, 0, s, k.data(), v.data());
      }
    }
    c.advance(n);
  };
  const std::pair<const char*, KvTypes> kinds[] = {{"f32", KvTypes{}},
                                                   {"f16", {KvType::F16, KvType::F16}},
                                                   {"q8_0", {KvType::Q8_0, KvType::Q8_0}}};
  for (const auto& [name, types] : kinds) {
    struct Case {
      const char* what;
      int32_t tokens, draft_rows, draft_base;
      bool with_draft;
    };
    for (const Case& c : {Case{"draft", 7, 6, 0, true}, Case{"window", 20, 5, 12, true},
                          Case{"no_draft", 9, 0, 0, false}, Case{"empty", 0, 0, 0, true}}) {
      KvCache target(fz::slot_fuzz_config(false), fz::kSlotFuzzContext, types);
      KvCache draft(fz::slot_fuzz_config(true), fz::kSlotFuzzContext, types);
      fill(target, c.tokens);
      fill(draft, c.draft_rows);
      std::vector<int32_t> tokens;
      for (int32_t i = 0; i < c.tokens; ++i) tokens.push_back((i * 37 + 11) % fz::kSlotFuzzVocab);
      specdec::write_slot_file(tmp.string(), tokens, {&target, fz::kSlotFuzzTargetFingerprint},
                               {c.with_draft ? &draft : nullptr, fz::kSlotFuzzDraftFingerprint},
                               c.draft_rows, c.draft_base);
      std::ifstream in(tmp, std::ios::binary);
      put(dir, std::string(name) + "_" + c.what,
          std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
    }
  }
  fs::remove(tmp);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR  (writes DIR/<target>/ seed files)\n", argv[0]);
    return 2;
  }
  const fs::path out = argv[1];
  try {
    gguf_seeds(out / "gguf");
    tokenizer_seeds(out / "tokenizer");
    chat_seeds(out / "chat_template");
    request_seeds(out / "request");
    http_seeds(out / "http");
    grammar_seeds(out / "grammar");
    slot_file_seeds(out / "slot_file");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
