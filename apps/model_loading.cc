#include "model_loading.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
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

Expected<std::string> ResolveModelDir(const std::string& model_arg) {
  TS_ASSIGN_OR_RETURN(ResolvedModel resolved, ResolveModelArg(model_arg));
  if (resolved.gguf) {
    return Unsupported(model_arg + " resolves to the GGUF file " + resolved.gguf->path + " (" +
                       ModelLocationName(resolved.location) +
                       "), and this command does not load GGUF files yet; give a checkpoint "
                       "folder or a model from tessera's store");
  }
  return resolved.dir;
}

Status VerifyGgufShowingProgress(const GgufModel& model) {
  ProgressRenderer shown = ProgressRenderer::ForStderr();
  shown.set_line_prefix("tessera: ");
  return VerifyGgufModel(model, shown.Callback());
}

Expected<std::unique_ptr<LoadedModel>> OpenModelShowingProgress(const std::string& dir,
                                                                ModelLoadOptions options) {
  ProgressRenderer shown = ProgressRenderer::ForStderr();
  shown.set_line_prefix("tessera: ");  // among the load's own "tessera: " notes
  options.progress = shown.Callback();
  return LoadedModel::Open(dir, options,
                           [&shown](const std::string& line) { shown.Note("tessera: " + line); });
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
