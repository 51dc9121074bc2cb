// Writes the tiny chat model the server end-to-end tests serve: a synthetic Llama with a
// working byte-level BPE tokenizer and a ChatML template (src/model/synthetic_checkpoint.h).
//
//   make_test_model OUT_DIR [--slow | --qwen TOKENIZER_DIR | --html TOKENIZER_DIR | --embed |
//                            --classify]
// --slow: wider and with a 4096-token context, so a long generation takes many seconds on
// the reference backend (for queue, deadline and kill tests).
// --qwen DIR: the real Qwen2.5 tokenizer and chat template copied from DIR (tool calls,
// structured outputs over a real vocabulary), with random weights at Qwen's padded vocabulary.
// --embed: a tiny Qwen3 with Qwen3-Embedding's sentence-transformers files (last-token
// pooling, normalised, a "query" prompt) and an 8192-position context.
// --classify: a tiny Qwen3ForSequenceClassification with three labels.
// --html DIR: a Qwen2 on the real Qwen2.5 tokenizer whose greedy reply to any chat prompt is
// kHtmlReply (HTML that a page must show as text), then <|im_end|>: every layer is zero, so
// the residual is the current token's embedding; each chain token has a one-hot embedding in
// its own dimension and the next token's LM head row holds that dimension, the generation
// prompt's last token leading to the first chain token and the last one to <|im_end|>.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "format/safetensors.h"
#include "model/synthetic_checkpoint.h"
#include "tokenizer/tokenizer.h"

namespace {

// No token repeats in it with the Qwen2.5 tokenizer (make_test_model checks), since a chain
// token can have only one successor.
constexpr const char* kHtmlReply = "<script>alert(1)</script><img src=x onerror=prompt()>";

tessera::Status CopyTokenizerFiles(const std::string& from, const std::string& to) {
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
    std::error_code ec;
    std::filesystem::copy_file(from + "/" + file, to + "/" + file,
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return tessera::IoError(std::string(file) + ": " + ec.message());
  }
  return tessera::Status::Ok();
}

// See --html above.
tessera::Status WriteHtmlParrot(const std::string& out, const std::string& tokenizer_dir) {
  auto tok = tessera::Tokenizer::FromFile(tokenizer_dir + "/tokenizer.json");
  if (!tok) return tok.status();
  auto chain = tok->Encode(kHtmlReply);
  if (!chain) return chain.status();
  auto prompt_end = tok->Encode("<|im_start|>assistant\n");
  if (!prompt_end) return prompt_end.status();
  const auto im_end = tok->TokenToId("<|im_end|>");
  if (!im_end || prompt_end->empty()) return tessera::Internal("not a Qwen tokenizer");
  // The walk: generation prompt's last token -> chain... -> <|im_end|>.
  std::vector<int32_t> walk = {prompt_end->back()};
  walk.insert(walk.end(), chain->begin(), chain->end());
  walk.push_back(*im_end);
  std::set<int32_t> seen;
  for (size_t i = 0; i + 1 < walk.size(); ++i) {
    if (!seen.insert(walk[i]).second) {
      return tessera::InvalidArgument("token " + std::to_string(walk[i]) +
                                      " repeats in the reply chain; choose another text");
    }
  }
  tessera::SyntheticModelSpec spec;
  spec.family = tessera::ModelFamily::kQwen2;
  spec.layers = 1;
  spec.heads = 2;
  spec.kv_heads = 1;
  spec.head_dim = 16;
  spec.hidden = 32 * ((static_cast<int64_t>(walk.size()) + 31) / 32);  // one dim per state
  spec.heads = spec.hidden / spec.head_dim;
  spec.intermediate = 32;
  spec.vocab = 151936;
  spec.max_position = 2048;
  spec.tied = false;
  spec.dtype = tessera::DType::kBF16;
  spec.bos_token_id = 151643;
  spec.eos_token_id = *im_end;
  if (tessera::Status st = tessera::WriteSyntheticCheckpoint(out, spec); !st.ok()) return st;
  const std::string file = out + "/model.safetensors";
  std::vector<tessera::TensorToWrite> tensors;
  {
    auto st = tessera::SafetensorsFile::Open(file);
    if (!st) return st.status();
    for (const tessera::TensorInfo& t : st->tensors()) {
      std::vector<float> v(t.num_elements, 0.0f);
      const bool norm = t.name.find("norm.weight") != std::string::npos;
      if (norm) std::fill(v.begin(), v.end(), 1.0f);
      const int64_t h = spec.hidden;
      for (size_t i = 0; i + 1 < walk.size(); ++i) {
        if (t.name == "model.embed_tokens.weight") v[walk[i] * h + i] = 1.0f;
        // The final norm scales the one-hot by sqrt(hidden); every other logit is 0.
        if (t.name == "lm_head.weight") v[walk[i + 1] * h + i] = 4.0f;
      }
      tensors.push_back(tessera::MakeTensor(t.name, t.dtype, t.shape, v));
    }
  }  // unmapped before the file is replaced
  if (tessera::Status st = tessera::WriteSafetensors(file, tensors); !st.ok()) return st;
  return CopyTokenizerFiles(tokenizer_dir, out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: make_test_model OUT_DIR [--slow | --qwen TOKENIZER_DIR | --html "
                 "TOKENIZER_DIR | --embed | --classify]\n");
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
  if (argc > 3 && mode == "--html") {
    if (tessera::Status st = WriteHtmlParrot(argv[1], argv[3]); !st.ok()) {
      std::fprintf(stderr, "make_test_model: %s\n", st.message().c_str());
      return 1;
    }
    return 0;
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
    if (st.ok()) st = CopyTokenizerFiles(argv[3], argv[1]);
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
