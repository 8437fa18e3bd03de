// `specdec make-draft -m TARGET --layers N -o OUT.gguf`: a self-speculative draft made of the
// target's first N blocks (see engine/layer_draft.h).
#include <iostream>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "common/error.h"
#include "engine/layer_draft.h"

namespace specdec::cli {

int make_draft_command(const std::vector<std::string>& args) {
  std::string model, out;
  int32_t layers = 0;
  ArgParser p("specdec make-draft -m TARGET --layers N -o DRAFT.gguf",
              "Writes a draft model made of the target's first N transformer blocks plus its\n"
              "output head (early-exit self-speculation). It shares the target's vocabulary\n"
              "by construction; use it with -md when no smaller model of the family exists.");
  p.add_string({"-m", "--model"}, "FILE", "target model (GGUF)", model);
  p.add_int({"--layers"}, "N", "blocks to keep", layers, 1, 100000);
  p.add_string({"-o", "--output"}, "FILE", "where to write the draft GGUF", out);
  if (!p.parse(args)) {
    std::cout << p.help();
    return 0;
  }
  if (model.empty() || out.empty() || layers == 0) fail("make-draft needs -m, --layers and -o");
  auto file = gguf::GgufFile::open(model);
  write_layer_draft(*file, layers, out);
  std::cout << out << "\n";
  return 0;
}

}  // namespace specdec::cli
