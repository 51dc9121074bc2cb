#include "model_loading.h"

#include <sys/stat.h>

#include <cstdio>

#include "base/mapped_file.h"
#include "catalog/catalog.h"
#include "catalog/model_store.h"
#include "catalog/package.h"
#include "catalog/package_cache.h"

namespace tessera {

namespace {

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

Expected<std::string> ResolveModelDir(const std::string& model_arg) {
  if (IsDirectory(model_arg)) {
    // A package is used only once every byte is verified, however it was named.
    if (IsPackageDir(model_arg)) TS_RETURN_IF_ERROR(VerifyPackage(model_arg).status());
    return model_arg;
  }
  TS_ASSIGN_OR_RETURN(const Catalog* catalog, BuiltinCatalog());
  TS_ASSIGN_OR_RETURN(ResolvedModel resolved, ResolveModel(model_arg, *catalog));
  return resolved.dir;
}

Expected<LoadedTokenizer> LoadTokenizerDir(const std::string& dir) {
  std::string path = dir + "/tokenizer.json";
  if (!FileExists(path)) {
    return NotFound("no tokenizer.json in " + dir +
                    "; --model must be a checkpoint or tokenizer folder");
  }
  auto tok = Tokenizer::FromFile(path);
  if (!tok) return tok.status().WithContext(path);
  TokenizerConfig config;
  std::string config_path = dir + "/tokenizer_config.json";
  if (FileExists(config_path)) {
    auto text = ReadFileToString(config_path, 64u << 20);
    if (!text) return text.status();
    auto parsed = ParseTokenizerConfig(*text);
    if (!parsed) return parsed.status().WithContext(config_path);
    config = std::move(*parsed);
  }
  return LoadedTokenizer{std::move(*tok), std::move(config)};
}

Expected<std::vector<int32_t>> EncodePrompt(const LoadedTokenizer& tok, const std::string& text) {
  EncodeOptions opts;
  opts.add_special_tokens = true;
  TS_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.tokenizer.Encode(text, opts));
  if (tok.config.add_bos_token.value_or(false) && tok.config.bos_token) {
    std::optional<int32_t> bos = tok.tokenizer.TokenToId(*tok.config.bos_token);
    if (!bos) {
      return Corrupt("tokenizer_config.json asks for add_bos_token but bos_token '" +
                     *tok.config.bos_token + "' is not in the vocabulary");
    }
    if (ids.empty() || ids.front() != *bos) ids.insert(ids.begin(), *bos);
  }
  return ids;
}

}  // namespace tessera

namespace tessera {

Expected<std::shared_ptr<const Checkpoint>> UsePackageCache(const std::string& model_arg,
                                                            std::shared_ptr<const Checkpoint> ckpt,
                                                            const Placement& placement,
                                                            WeightFormat weights) {
  std::string note;
  auto chosen =
      CheckpointForRun(model_arg, std::move(ckpt), placement.OnlyOn("cpu"), weights, &note);
  if (!note.empty()) std::fprintf(stderr, "tessera: %s\n", note.c_str());
  return chosen;
}

}  // namespace tessera
