// Fuzzes tokenizer.json loading (Tokenizer::FromJson, as Tokenizer::FromFile does after reading
// the file), then uses what loaded: encodes fixed texts (with and without special tokens),
// decodes the ids (also streaming) and looks a few ids up.
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto tok = tessera::Tokenizer::FromJson(text);
  tessera::fuzz::Note("FromJson", tok.status().ToString());
  if (!tok) return 0;
  static const char* const kTexts[] = {"Hello, world! 123 <|im_start|>user\n  héllo 世界 🙂\t",
                                       "", " a  b\r\n", "<s>[INST] x [/INST]</s>"};
  for (const char* t : kTexts) {
    for (int mode = 0; mode < 2; ++mode) {
      tessera::EncodeOptions options;
      options.add_special_tokens = mode == 0;
      options.split_special_tokens = mode == 1;
      auto ids = tok->Encode(t, options);
      if (!ids) continue;
      (void)tok->Decode(*ids, /*skip_special_tokens=*/mode == 0);
      tessera::StreamingDetokenizer stream(*tok, /*skip_special_tokens=*/false);
      for (int32_t id : *ids) (void)stream.Push(id);
      (void)stream.Finish();
    }
  }
  const int32_t n = tok->vocab_size();
  for (int32_t id : {0, 1, n / 2, n - 1, n, -1}) {
    (void)tok->IdToToken(id);
    (void)tok->IsSpecial(id);
    const std::vector<int32_t> one{id};
    (void)tok->Decode(one, false);
  }
  (void)tok->TokenToId("<|im_end|>");
  return 0;
}
