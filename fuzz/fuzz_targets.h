// The fuzz entry points. Each takes one input as libFuzzer hands it over and returns 0; an
// input that breaks an invariant aborts (FUZZ_CHECK below), and memory or undefined-behaviour
// errors are caught by the sanitizers the fuzz build adds. They live in the library
// specdec_fuzz_targets, which is linked into one libFuzzer binary per target (fuzz_<name>, built
// with -DSPECDEC_FUZZ=ON by clang) and into test_fuzz, the regular gtest that replays
// fuzz/corpus/<name>/ and fuzz/regressions/<name>/ in every build (docs/fuzzing.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace specdec::fuzz {

// GgufFile::open on the bytes (through a memfd), every tensor's data range read, the metadata
// getters, and what the engine builds from a file: ModelConfig, Model::load (which validates
// every tensor's presence, shape and type and packs the matrices), Tokenizer and ChatTemplate.
int fuzz_one_gguf(const uint8_t* data, size_t size);

// Tokenizer::encode on arbitrary text and StreamingDecoder over its ids and over arbitrary id
// sequences, for byte-level BPE (every pre-tokenizer) and SentencePiece vocabularies, optionally
// extended with tokens and merges taken from the input.
int fuzz_one_tokenizer(const uint8_t* data, size_t size);

// ChatTemplate::detect on an arbitrary template source (or a fixed format), apply() to an
// arbitrary message list, and encode_prompt of the result.
int fuzz_one_chat_template(const uint8_t* data, size_t size);

// parse_request for either endpoint on an arbitrary body, then what the server does with an
// accepted request (check_model, chat rendering and tokenization, resolve_max_tokens, the
// sampling distribution, the stop matcher) or with a rejected one (the error JSON).
int fuzz_one_request(const uint8_t* data, size_t size);

// HttpRequestParser (the server's HTTP/1.1 transport) on an arbitrary byte stream, fed in pieces
// and all at once: the same requests or error both ways, each request well formed.
int fuzz_one_http(const uint8_t* data, size_t size);

// Grammar::parse on arbitrary GBNF, then GrammarState on a text fed whole and byte by byte (the
// same result) and the token mask of a tiny vocabulary checked against each token's bytes.
int fuzz_one_grammar(const uint8_t* data, size_t size);

// regex_gbnf on an arbitrary pattern in both modes (plain, JSON string), the grammar it writes
// compiled, and its language checked against PCRE2's matches on a text and its prefixes.
int fuzz_one_regex(const uint8_t* data, size_t size);

// read_slot_file (a slot's saved K/V, engine/slot_file.h) on arbitrary bytes into caches of each
// type; what it accepts is what it says, and written back gives the same bytes.
int fuzz_one_slot_file(const uint8_t* data, size_t size);

struct FuzzTarget {
  std::string_view name;  // the folder under fuzz/corpus and fuzz/regressions, fuzz_<name>
  int (*run)(const uint8_t*, size_t);
};
inline constexpr FuzzTarget kFuzzTargets[] = {
    {"gguf", fuzz_one_gguf},
    {"tokenizer", fuzz_one_tokenizer},
    {"chat_template", fuzz_one_chat_template},
    {"request", fuzz_one_request},
    {"http", fuzz_one_http},
    {"grammar", fuzz_one_grammar},
    {"regex", fuzz_one_regex},
    {"slot_file", fuzz_one_slot_file},
};

// Aborts with a message naming the broken invariant: libFuzzer reports it as a crash and saves
// the input; under gtest the replay test dies.
[[noreturn]] void check_failed(const char* file, int line, const char* cond);

}  // namespace specdec::fuzz

#define FUZZ_CHECK(cond) \
  ((cond) ? static_cast<void>(0) : ::specdec::fuzz::check_failed(__FILE__, __LINE__, #cond))
