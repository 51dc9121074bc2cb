// A small but real byte-level BPE tokenizer for synthetic checkpoints: merges are learned
// (greedy pair counting, deterministic tie-breaking) from a built-in English text, so
// `tessera synth` models tokenize and detokenize prose like a GPT-2/Qwen-style tokenizer
// without any download. Special tokens: <|endoftext|>, <|im_start|>, <|im_end|>.
//
//   TS_ASSIGN_OR_RETURN(SyntheticTokenizerFiles files, MakeSyntheticTokenizer(2000));
//   files.tokenizer_json;        // write as tokenizer.json
//   files.tokenizer_config_json; // write as tokenizer_config.json (ChatML template)
//   files.eos_id;                // id of <|im_end|>
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace tessera {

struct SyntheticTokenizerFiles {
  std::string tokenizer_json;
  std::string tokenizer_config_json;
  int32_t vocab_size = 0;  // byte tokens + merges + special tokens
  int32_t endoftext_id = 0;
  int32_t im_start_id = 0;
  int32_t im_end_id = 0;
};

// At most `max_merges` merges (fewer if the text runs out of repeated pairs).
Expected<SyntheticTokenizerFiles> MakeSyntheticTokenizer(int max_merges);

}  // namespace tessera
