// `specdec serve`'s sampling flags, as llama-server takes them: --temp 0.7 --top-p 0.9 -n 256
// --seed 7 ... set what every request that leaves those fields out gets
// (server/request_defaults.h), on every endpoint. Flags not given leave each endpoint's own
// defaults (OpenAI's temperature 1, llama-server's /completion and Ollama's 0.8, ...) in place, so
// a server started without them answers exactly as before.
#pragma once

#include <string>

#include "cli/arg_parser.h"
#include "server/request_defaults.h"

namespace specdec::cli {

// Adds the flags; each writes its chat-completions field into `defaults`: --temp, --top-k,
// --top-p, --min-p, --typical, --top-nsigma, --xtc-probability, --xtc-threshold,
// --dynatemp-range, --dynatemp-exp, --mirostat, --mirostat-ent, --mirostat-lr, --samplers,
// --sampling-seq, --repeat-penalty, --presence-penalty, --frequency-penalty, --repeat-last-n,
// -l/--logit-bias, the --dry-* flags, -s/--seed (-1: a random seed per request, as without it),
// -n/--n-predict (-1: no limit, as without it), --ignore-eos, --reasoning-format (auto, deepseek,
// none) and --reasoning-budget (-1, or 0: chat_template_kwargs.enable_thinking false).
void add_request_default_options(ArgParser& p, server::RequestDefaults& defaults);

// Checks the values as a request that sent them would be checked (server/request_defaults.h);
// fails with specdec::Error naming the flag (e.g. "--temp: 'temperature' must be between 0 and 2,
// got 3").
void check_request_default_options(const server::RequestDefaults& defaults);

// The flag that sets a chat-completions field ("temperature" -> "--temp"); the field itself for
// one no flag sets.
std::string request_default_flag(const std::string& field);

}  // namespace specdec::cli
