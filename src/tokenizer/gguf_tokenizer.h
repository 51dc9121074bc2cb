// The tokenizer of a GGUF file, rebuilt from its `tokenizer.ggml.*` metadata so that it encodes
// and decodes like the Hugging Face tokenizer the file was converted from.
//
//   GgufTokenizerData data;            // filled by the GGUF reader from the metadata keys
//   data.model = "gpt2"; data.pre = "qwen2"; data.tokens = ...; data.token_types = ...;
//   data.merges = ...; data.eos_id = 151645; data.add_bos_token = false;
//   TS_ASSIGN_OR_RETURN(Tokenizer tok, TokenizerFromGguf(data));
//
// Supported (anything else is refused with one line naming it and listing these):
//   model "gpt2" (byte-level BPE) with pre "qwen2" (Qwen2/2.5/3, MiniCPM-V 4.5), "qwen35"
//     (Qwen3.5), "llama-bpe" / "llama3" / "llama-v3" (Llama 3), "smollm" (SmolLM/SmolLM2);
//   model "llama" (SentencePiece BPE with byte fallback: Gemma 3, Llama 2 style, MiniCPM)
//     with pre "default" or no pre.
// How the metadata maps onto tessera's tokenizer (llama.cpp's converter, convert_hf_to_gguf.py,
// defines what the keys hold):
//   * every token is in the BPE vocabulary, and CONTROL / USER_DEFINED tokens are also added
//     tokens matched in the raw text (special = CONTROL, as llama.cpp treats them); in a
//     "gpt2" file UNUSED tokens are the converter's "[PAD<id>]" fillers for ids the Hugging
//     Face tokenizer does not have, so those ids get no token (as in Hugging Face).
//   * "gpt2": the ranked merges as written; the pre name selects the normalizer and
//     pre-tokenizer of that family's tokenizer.json (e.g. NFC + the Qwen split regex).
//   * "llama": merges are derived from the piece scores as Hugging Face's SentencePiece
//     converter derives them; the converter writes score -1000 for CONTROL/USER_DEFINED
//     tokens and turns "▁" into " " in USER_DEFINED tokens, so those count as score 0 (what
//     SentencePiece gives them) and get their "▁" back.
//   * add_bos_token / add_eos_token / add_space_prefix: llama.cpp's defaults when a key is
//     absent ("llama": add BOS, add a space prefix; "gpt2": add BOS only for the Llama 3 pre).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

// llama.cpp's token types (tokenizer.ggml.token_type values).
enum class GgufTokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// The tokenizer metadata of a GGUF file, one member per `tokenizer.ggml.*` key; an absent key
// is an empty vector / std::nullopt / empty string.
struct GgufTokenizerData {
  std::string model = {};                 // tokenizer.ggml.model: "gpt2" or "llama"
  std::string pre = {};                   // tokenizer.ggml.pre, e.g. "qwen2"
  std::vector<std::string> tokens = {};   // tokenizer.ggml.tokens, index = token id
  std::vector<float> scores = {};         // tokenizer.ggml.scores (needed by "llama")
  std::vector<int32_t> token_types = {};  // tokenizer.ggml.token_type (GgufTokenType values)
  std::vector<std::string> merges = {};   // tokenizer.ggml.merges, "left right" (for "gpt2")
  std::optional<uint32_t> bos_id = std::nullopt;        // tokenizer.ggml.bos_token_id
  std::optional<uint32_t> eos_id = std::nullopt;        // tokenizer.ggml.eos_token_id
  std::optional<uint32_t> eot_id = std::nullopt;        // tokenizer.ggml.eot_token_id
  std::optional<uint32_t> eom_id = std::nullopt;        // tokenizer.ggml.eom_token_id
  std::optional<uint32_t> unk_id = std::nullopt;        // tokenizer.ggml.unknown_token_id
  std::optional<uint32_t> sep_id = std::nullopt;        // tokenizer.ggml.seperator_token_id (sic)
  std::optional<uint32_t> pad_id = std::nullopt;        // tokenizer.ggml.padding_token_id
  std::optional<uint32_t> mask_id = std::nullopt;       // tokenizer.ggml.mask_token_id
  std::optional<bool> add_bos_token = std::nullopt;     // tokenizer.ggml.add_bos_token
  std::optional<bool> add_eos_token = std::nullopt;     // tokenizer.ggml.add_eos_token
  std::optional<bool> add_space_prefix = std::nullopt;  // tokenizer.ggml.add_space_prefix
  std::optional<std::string> chat_template = std::nullopt;  // tokenizer.chat_template
};

// Builds the tokenizer; Unsupported for a model or pre name not listed above, Corrupt for
// inconsistent metadata (sizes, ids out of range, merges naming unknown tokens, ...).
Expected<Tokenizer> TokenizerFromGguf(const GgufTokenizerData& gguf);

// One line listing the supported tokenizer.ggml.model / tokenizer.ggml.pre values.
std::string SupportedGgufTokenizers();

}  // namespace tessera
