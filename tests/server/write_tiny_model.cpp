// Writes a tiny random-weight GGUF model (tests/support/tiny_model.h) for the server's Python
// end-to-end tests, which need a model file but cannot call the C++ test helpers.
//   write_tiny_model OUT.gguf [n_ctx] [n_embd] [n_layer] [n_ff] [seed] [fim 0|1] [tools 0|1|2]
//   write_tiny_model --lora OUT.gguf: a LoRA adapter (tests/support/tiny_lora.h) for the default
//   shapes (n_embd 64, 2 layers, n_ff 128)
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include "support/tiny_lora.h"
#include "support/tiny_model.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr
        << "usage: write_tiny_model OUT.gguf [n_ctx] [n_embd] [n_layer] [n_ff] [seed] [fim 0|1] "
           "[tools 0|1|2]\n";
    return 1;
  }
  specdec::testing::TinyModelSpec spec;
  if (std::string(argv[1]) == "--lora") {
    if (argc != 3) {
      std::cerr << "usage: write_tiny_model --lora OUT.gguf\n";
      return 1;
    }
    try {
      std::cout << specdec::testing::write_tiny_lora(spec, {}, argv[2]) << "\n";
    } catch (const std::exception& e) {
      std::cerr << "error: " << e.what() << "\n";
      return 1;
    }
    return 0;
  }
  auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  spec.n_ctx = arg(2, spec.n_ctx);
  spec.n_embd = arg(3, spec.n_embd);
  spec.n_layer = arg(4, spec.n_layer);
  spec.n_ff = arg(5, spec.n_ff);
  spec.seed = static_cast<uint64_t>(arg(6, 1));
  // A code model's fill-in-the-middle markers (completions' `suffix`); 0 as the 7th argument
  // leaves them out.
  spec.fim_tokens = arg(7, 1) != 0;
  // 1: a ChatML template with Qwen2.5's tool-calling convention (its <tool_call> marker), so
  // that the server offers tools; 2: the same with Qwen3's <think> tags, so that it also
  // treats the model as a thinking one.
  if (const int tools = arg(8, 0); tools != 0) {
    spec.chat_template =
        "{%- if tools %}<tools></tools> <tool_call></tool_call>{%- endif %}"
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
        "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
        "{{ '<|im_start|>assistant\\n' }}{% endif %}";
    if (tools == 2)
      spec.chat_template += "{%- if enable_thinking is false %}<think></think>{% endif %}";
  }
  try {
    std::cout << specdec::testing::write_tiny_model(spec, argv[1]) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
