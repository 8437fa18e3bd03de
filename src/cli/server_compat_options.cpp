#include "cli/server_compat_options.h"

#include <cstdint>

#include "common/error.h"

namespace specdec::cli {

namespace {

// An integer flag that changes nothing here: checked as llama-server checks it (at least `min`),
// then noted with `why`.
void add_noted_int(ArgParser& p, std::vector<std::string> names, const std::string& help,
                   int64_t min, std::string why, ServerCompatOptions& options) {
  const std::string flag = names.back();
  p.add_value(std::move(names), "N", help,
              [&options, flag, min, why = std::move(why)](const std::string& v) {
                const int64_t n = parse_int(v, flag);
                if (n < min) fail(flag, " must be at least ", min, ", got ", n);
                options.notes.push_back(str_cat(flag, " ", v, " changes nothing: ", why));
              });
}

}  // namespace

void add_server_compat_options(ArgParser& p, ServerCompatOptions& options) {
  p.add_value({"-to", "--timeout"}, "S",
              "llama-server's read/write timeout: here the seconds a request's headers and body "
              "may take to arrive, as --request-timeout (which wins when both are given)",
              [&options](const std::string& v) {
                const double s = parse_float(v, "--timeout");
                if (!(s >= 0.1 && s <= 3600)) fail("--timeout must be in [0.1, 3600], got ", v);
                options.timeout_s = s;
              });
  const std::string sizes =
      "specdec sizes its passes itself (a prompt in --prefill-chunk pieces beside other slots' "
      "decoding, whole when alone)";
  add_noted_int(p, {"-b", "--batch-size"}, "accepted for llama-server's command lines; " + sizes, 1,
                sizes, options);
  add_noted_int(p, {"-ub", "--ubatch-size"}, "the same", 1, sizes, options);
  const std::string no_shift =
      "specdec never shifts the context: a request ends at the context's end";
  add_noted_int(p, {"--keep"}, "accepted for llama-server's command lines; " + no_shift, -1,
                no_shift, options);
  p.add_value({"--context-shift"}, "",
              "refused: specdec does not shift the context (a request that fills it ends with "
              "finish_reason length); raise -c instead",
              [&options](const std::string&) { options.context_shift = true; });
  p.add_value({"--no-context-shift"}, "",
              "accepted for llama-server's command lines: what specdec always does",
              [&options](const std::string&) { options.context_shift = false; });
  add_noted_int(p, {"--cache-reuse"},
                "accepted for llama-server's command lines: a slot reuses its longest common "
                "prefix, and other slots' prompt rows, without it",
                0,
                "a slot reuses the longest prefix it shares with its cache or another slot's "
                "prompt, whatever the chunk size",
                options);
  for (const char* always : {"--no-warmup", "--slots", "--props"}) {
    p.add_value({always}, "",
                "accepted for llama-server's command lines: what specdec always does (no warm-up "
                "pass; /slots and /props always answer)",
                [](const std::string&) {});
  }
  add_noted_int(p, {"--threads-http"},
                "accepted for llama-server's command lines: --max-connections bounds the "
                "connections served at once",
                -1, "--max-connections bounds the connections served at once", options);
  p.add_value({"-sps", "--slot-prompt-similarity"}, "F",
              "accepted for llama-server's command lines: a request takes the slot whose cache "
              "shares the longest prefix with its prompt",
              [&options](const std::string& v) {
                const double f = parse_float(v, "--slot-prompt-similarity");
                if (!(f >= 0 && f <= 1))
                  fail("--slot-prompt-similarity must be in [0, 1], got ", v);
                options.notes.push_back(
                    str_cat("--slot-prompt-similarity ", v,
                            " changes nothing: a request takes the slot whose cache shares the "
                            "longest prefix with its prompt"));
              });
  p.add_value({"--numa"}, "distribute|isolate|numactl",
              "accepted for llama.cpp's command lines: specdec places no threads by NUMA node",
              [&options](const std::string& v) {
                if (v != "distribute" && v != "isolate" && v != "numactl") {
                  fail("--numa must be distribute, isolate or numactl, got '", v, "'");
                }
                options.notes.push_back(str_cat(
                    "--numa ", v, " changes nothing: specdec places no threads by NUMA node"));
              });
}

void check_server_compat_options(const ServerCompatOptions& options, std::ostream& log) {
  if (options.context_shift) {
    fail(
        "--context-shift: specdec does not shift the context; a request that fills it ends "
        "with finish_reason length (raise -c instead)");
  }
  for (const std::string& note : options.notes) log << "specdec: " << note << "\n";
}

}  // namespace specdec::cli
