// Writes a tiny random-weight GGUF model (tests/support/tiny_model.h) for the server's Python
// end-to-end tests, which need a model file but cannot call the C++ test helpers.
//   write_tiny_model OUT.gguf [n_ctx] [n_embd] [n_layer] [n_ff] [seed]
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include "support/tiny_model.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: write_tiny_model OUT.gguf [n_ctx] [n_embd] [n_layer] [n_ff] [seed]\n";
    return 1;
  }
  specdec::testing::TinyModelSpec spec;
  auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  spec.n_ctx = arg(2, spec.n_ctx);
  spec.n_embd = arg(3, spec.n_embd);
  spec.n_layer = arg(4, spec.n_layer);
  spec.n_ff = arg(5, spec.n_ff);
  spec.seed = static_cast<uint64_t>(arg(6, 1));
  try {
    std::cout << specdec::testing::write_tiny_model(spec, argv[1]) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
