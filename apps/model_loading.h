// Loading what the CLI commands share: a checkpoint's tokenizer with its tokenizer_config.json
// policy, the stop ids, and the executor over a placement.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model_executor.h"
#include "engine/placement.h"
#include "format/model_config.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

// --model: an existing directory is used as given; anything else is a model name resolved
// through tessera's store and the Hugging Face cache (catalog/model_store.h).
Expected<std::string> ResolveModelDir(const std::string& model_arg);

struct LoadedTokenizer {
  Tokenizer tokenizer;
  TokenizerConfig config;  // defaults when tokenizer_config.json is absent
};

// DIR/tokenizer.json (required) and DIR/tokenizer_config.json (optional).
Expected<LoadedTokenizer> LoadTokenizerDir(const std::string& dir);

// Encodes a prompt the way the checkpoint asks: the tokenizer.json post-processor, and a BOS
// prepended when tokenizer_config.json says add_bos_token and the post-processor did not.
Expected<std::vector<int32_t>> EncodePrompt(const LoadedTokenizer& tok, const std::string& text);

// For a checkpoint given by path (a directory, not a name, outside the models directory and
// the Hugging Face cache) that runs entirely on the cpu backend: its package, converted on first
// use and reused while the source is unchanged (catalog/package_cache.h); otherwise `ckpt` itself.
// The choice is printed on stderr; a package that cannot be written is reported and the source is
// packed at load instead.
Expected<std::shared_ptr<const Checkpoint>> UsePackageCache(const std::string& model_arg,
                                                            std::shared_ptr<const Checkpoint> ckpt,
                                                            const Placement& placement,
                                                            WeightFormat weights);

}  // namespace tessera
