// What a GGUF file says besides its weights, read for loading it in place: the tokenizer's
// `tokenizer.ggml.*` keys (for TokenizerFromGguf), the chat template and its special tokens,
// the stop ids (a GGUF has no generation_config.json: its eos, eot and eom ids) and what the
// model serves (chat with a template, completion without). LoadedModel::Open(GgufModel)
// (loaded_model.h) is built on these.
//
//   TS_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::Open(path));
//   TS_ASSIGN_OR_RETURN(GgufTokenizerData data, ReadGgufTokenizerData(gguf));
//   TS_ASSIGN_OR_RETURN(Tokenizer tok, TokenizerFromGguf(data));
//   std::vector<int32_t> stops = GgufStopIds(data, vocab_size);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "chat/chat_template.h"
#include "format/gguf.h"
#include "format/model_kind.h"
#include "tokenizer/gguf_tokenizer.h"

namespace tessera {

// Every tokenizer.ggml.* key (and tokenizer.chat_template) that is present, typed; a key of
// the wrong type is Corrupt, naming it.
Expected<GgufTokenizerData> ReadGgufTokenizerData(const GgufFile& gguf);

// The chat template (tokenizer.chat_template) with bos_token/eos_token/unk_token/pad_token
// set from the ids' tokens, as tokenizer_config.json would give them; nullopt without one.
Expected<std::optional<ChatTemplateConfig>> GgufChatTemplate(const GgufTokenizerData& data);

// eos, eot and eom ids (once each, inside the vocabulary): where generation stops.
std::vector<int32_t> GgufStopIds(const GgufTokenizerData& data, int64_t vocab_size);

// A GGUF model serves chat when it has tokenizer.chat_template, completion otherwise.
Expected<ModelKindInfo> DetectGgufModelKind(const std::string& gguf_path);

}  // namespace tessera
