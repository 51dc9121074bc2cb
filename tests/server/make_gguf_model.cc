// Writes a checkpoint folder (llama, qwen2, qwen3 or qwen3_5; e.g. make_test_model's --qwen
// model) as an F32 GGUF file with its tokenizer as tokenizer.ggml.* metadata, as llama.cpp's
// converter would (tests/support/hf_to_gguf.h), for the GGUF end-to-end test.
//
//   make_gguf_model CHECKPOINT_DIR OUT.gguf PRE [--no-chat-template]
// PRE: the tokenizer.ggml.pre name ("qwen2"); --no-chat-template leaves tokenizer.chat_template
// out (a base model's file).
#include <cstdio>
#include <string>

#include "support/hf_to_gguf.h"

int main(int argc, char** argv) {
  const bool chat_template = !(argc == 5 && std::string(argv[4]) == "--no-chat-template");
  if (argc != 4 && chat_template) {
    std::fprintf(stderr,
                 "usage: make_gguf_model CHECKPOINT_DIR OUT.gguf PRE [--no-chat-template]\n");
    return 2;
  }
  if (tessera::Status st =
          tessera::test::WriteGgufOfCheckpoint(argv[1], argv[3], argv[2], chat_template);
      !st.ok()) {
    std::fprintf(stderr, "make_gguf_model: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}
