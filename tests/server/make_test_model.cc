// Writes the tiny chat model the server end-to-end tests serve: a synthetic Llama with a
// working byte-level BPE tokenizer and a ChatML template (src/model/synthetic_checkpoint.h).
//
//   make_test_model OUT_DIR [--slow]
// --slow: wider and with a 4096-token context, so a long generation takes many seconds on
// the reference backend (for queue, deadline and kill tests).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "model/synthetic_checkpoint.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: make_test_model OUT_DIR [--slow]\n");
    return 2;
  }
  tessera::SyntheticModelSpec spec;
  spec.vocab = 4352;  // room for the synthetic tokenizer's merges and special tokens
  spec.max_position = 256;
  if (argc > 2 && std::string(argv[2]) == "--slow") {
    spec.hidden = 512;
    spec.intermediate = 1024;
    spec.layers = 4;
    spec.heads = 8;
    spec.kv_heads = 4;
    spec.head_dim = 64;
    spec.max_position = 4096;
  }
  tessera::Status st = tessera::WriteSyntheticModel(argv[1], spec);
  if (!st.ok()) {
    std::fprintf(stderr, "make_test_model: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}
