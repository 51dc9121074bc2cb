// Fuzzes config.json as model loading reads it: ParseModelConfig, then BuildModelSpec (the
// shapes every later layer trusts); the same text also goes to the generation_config.json and
// tokenizer_config.json parsers, which read the same kind of file.
#include <cstdint>
#include <string_view>

#include "format/model_config.h"
#include "fuzz_util.h"
#include "model/model_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = tessera::ParseModelConfig(text);
  tessera::fuzz::Note("ParseModelConfig", config.status().ToString());
  if (config) {
    auto spec = tessera::BuildModelSpec(*config);
    tessera::fuzz::Note("BuildModelSpec", spec.status().ToString());
    if (spec) (void)tessera::DescribeModelSpec(*spec);
  }
  (void)tessera::ParseGenerationConfig(text);
  (void)tessera::ParseTokenizerConfig(text);
  return 0;
}
