// llama-server's remaining common flags on `specdec serve`, so that its command lines run
// unchanged: beside the sampling defaults (request_default_options.h) and the device and
// speculative flags (engine_setup.h). Each one either does what it does there, is what specdec
// always does (accepted silently), or cannot change anything here (accepted, with a note on
// stderr saying why); the one whose behaviour specdec does not have (--context-shift) stops the
// server before it loads anything.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/arg_parser.h"

namespace specdec::cli {

struct ServerCompatOptions {
  // -to/--timeout S: llama-server's HTTP read/write timeout; here the time a request's headers
  // and body may take to arrive (--request-timeout), which it sets unless that is given too.
  std::optional<double> timeout_s;
  bool context_shift = false;      // --context-shift: refused (check_server_compat_options)
  std::vector<std::string> notes;  // "-b 2048 changes nothing: ..." lines for stderr
};

// -to/--timeout, -b/--batch-size, -ub/--ubatch-size, --keep, --context-shift,
// --no-context-shift, --cache-reuse, --no-warmup, --slots, --props, --threads-http,
// -sps/--slot-prompt-similarity, --numa.
void add_server_compat_options(ArgParser& p, ServerCompatOptions& options);

// After parsing, before anything loads: fails on --context-shift; writes the notes to `log`.
void check_server_compat_options(const ServerCompatOptions& options, std::ostream& log);

}  // namespace specdec::cli
