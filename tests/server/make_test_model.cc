// Writes the tiny chat model the server end-to-end tests serve: a synthetic Llama with a
// working byte-level BPE tokenizer and a ChatML template (src/model/synthetic_checkpoint.h).
//
//   make_test_model OUT_DIR [--slow | --qwen TOKENIZER_DIR | --embed | --classify]
// --slow: wider and with a 4096-token context, so a long generation takes many seconds on
// the reference backend (for queue, deadline and kill tests).
// --qwen DIR: the real Qwen2.5 tokenizer and chat template copied from DIR (tool calls,
// structured outputs over a real vocabulary), with random weights at Qwen's padded vocabulary.
// --embed: a tiny Qwen3 with Qwen3-Embedding's sentence-transformers files (last-token
// pooling, normalised, a "query" prompt) and an 8192-position context.
// --classify: a tiny Qwen3ForSequenceClassification with three labels.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
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
  const std::string mode = argc > 2 ? argv[2] : "";
  if (mode == "--embed" || mode == "--classify") {
    spec.family = tessera::ModelFamily::kQwen3;
    spec.hidden = 64;
    spec.intermediate = 96;
    spec.heads = 4;
    spec.kv_heads = 2;
    spec.head_dim = 16;
    if (mode == "--embed") {
      spec.sentence_transformers = true;
      spec.max_position = 8192;
    } else {
      spec.class_labels = {"negative", "neutral", "positive"};
      spec.seed = 5;
    }
  }
  if (argc > 3 && std::string(argv[2]) == "--qwen") {
    spec.family = tessera::ModelFamily::kQwen2;
    spec.hidden = 32;
    spec.intermediate = 64;
    spec.heads = 2;
    spec.kv_heads = 1;
    spec.head_dim = 16;
    spec.vocab = 151936;
    spec.max_position = 2048;
    spec.dtype = tessera::DType::kBF16;
    spec.bos_token_id = 151643;  // <|endoftext|>
    spec.eos_token_id = 151645;  // <|im_end|>
    tessera::Status st = tessera::WriteSyntheticCheckpoint(argv[1], spec);
    std::error_code ec;
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
      std::filesystem::copy_file(std::string(argv[3]) + "/" + file,
                                 std::string(argv[1]) + "/" + file,
                                 std::filesystem::copy_options::overwrite_existing, ec);
      if (ec) st = tessera::IoError(std::string(file) + ": " + ec.message());
    }
    if (!st.ok()) {
      std::fprintf(stderr, "make_test_model: %s\n", st.message().c_str());
      return 1;
    }
    return 0;
  }
  tessera::Status st = tessera::WriteSyntheticModel(argv[1], spec);
  if (!st.ok()) {
    std::fprintf(stderr, "make_test_model: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}
