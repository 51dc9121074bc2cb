#include "model_loading.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <vector>

#include "base/progress.h"
#include "catalog/builtin_model.h"
#include "catalog/catalog.h"
#include "catalog/model_store.h"
#include "catalog/package.h"

namespace tessera {

namespace {

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// `open` (a LoadedModel::Open) with the load's phases shown on stderr: a bar on a terminal,
// plain lines otherwise, its notes as "tessera: ..." lines among them.
template <typename OpenFn>
Expected<std::unique_ptr<LoadedModel>> OpenShowingProgress(ModelLoadOptions options, OpenFn open) {
  ProgressRenderer shown = ProgressRenderer::ForStderr();
  shown.set_line_prefix("tessera: ");
  options.progress = shown.Callback();
  const std::function<void(const std::string&)> log = [&shown](const std::string& line) {
    shown.Note("tessera: " + line);
  };
  return open(options, log);
}

}  // namespace

Expected<ResolvedModel> ResolveModelArg(const std::string& model_arg) {
  TS_ASSIGN_OR_RETURN(const Catalog* catalog, BuiltinCatalog());
  std::error_code ec;
  const bool exists = std::filesystem::exists(model_arg, ec);
  if (IsDirectory(model_arg) || exists) {
    // A folder or file that exists is a path even when not written as one ("models/x").
    const std::string as_path = LooksLikePath(model_arg) ? model_arg : "./" + model_arg;
    TS_ASSIGN_OR_RETURN(ResolvedModel resolved, ResolveModel(as_path, *catalog));
    if (!resolved.gguf) resolved.dir = model_arg;  // as given, as before
    resolved.name = model_arg;
    return resolved;
  }
  return ResolveModel(model_arg, *catalog);
}

Expected<ResolvedModel> ResolveModelToLoad(const std::string& model_arg) {
  TS_ASSIGN_OR_RETURN(ResolvedModel resolved, ResolveModelArg(model_arg));
  if (resolved.gguf && !resolved.gguf->expected_sha256.empty()) {
    TS_RETURN_IF_ERROR(VerifyGgufShowingProgress(*resolved.gguf));
  }
  return resolved;
}

Status VerifyGgufShowingProgress(const GgufModel& model) {
  ProgressRenderer shown = ProgressRenderer::ForStderr();
  shown.set_line_prefix("tessera: ");
  return VerifyGgufModel(model, shown.Callback());
}

Expected<std::unique_ptr<LoadedModel>> OpenModelShowingProgress(const std::string& dir,
                                                                ModelLoadOptions options) {
  return OpenShowingProgress(std::move(options), [&](const ModelLoadOptions& o, const auto& log) {
    return LoadedModel::Open(dir, o, log);
  });
}

Expected<std::unique_ptr<LoadedModel>> OpenModelShowingProgress(const ResolvedModel& model,
                                                                ModelLoadOptions options) {
  return OpenShowingProgress(std::move(options), [&](const ModelLoadOptions& o, const auto& log) {
    return model.gguf ? LoadedModel::Open(*model.gguf, o, log)
                      : LoadedModel::Open(model.dir, o, log);
  });
}

Expected<std::string> DefaultChatModelName() {
  TS_ASSIGN_OR_RETURN(const Catalog* catalog, BuiltinCatalog());
  TS_ASSIGN_OR_RETURN(std::vector<InstalledModel> listed, ListInstalledModels(*catalog, false));
  // An Ollama model tessera cannot run (a projector, an adapter) is listed, never chosen.
  std::vector<InstalledModel> installed;
  for (InstalledModel& m : listed) {
    if (!m.verification.starts_with("refused: ")) installed.push_back(std::move(m));
  }
  if (installed.empty()) {
    std::fprintf(stderr, "tessera: %s\n", kBuiltinModelNotice);
    return std::string(kBuiltinModelName);
  }
  if (installed.size() == 1) {
    std::fprintf(stderr, "tessera: no model given: using %s, the one installed model\n",
                 installed[0].name.c_str());
    return installed[0].name;
  }
  std::string names;
  for (const InstalledModel& m : installed) names += (names.empty() ? "" : ", ") + m.name;
  return InvalidArgument("which model? " + std::to_string(installed.size()) + " are installed (" +
                         names + "); name one with --model NAME");
}

}  // namespace tessera
