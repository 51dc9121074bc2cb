#include "catalog/gguf_stores.h"

#include <filesystem>

#include "catalog/lmstudio_store.h"
#include "catalog/ollama_store.h"
#include "format/json_util.h"

namespace tessera {
namespace fs = std::filesystem;
namespace {

ResolvedModel ResolvedFromGguf(GgufModel model) {
  ResolvedModel r;
  r.name = model.name;
  r.location = model.location;
  r.gguf = std::move(model);
  return r;
}

}  // namespace

Expected<GgufStoreLookup> FindInGgufStores(std::string_view name) {
  GgufStoreLookup lookup;
  lookup.is_name_there = ParseOllamaName(name).has_value();
  if (auto root = OllamaModelsDir()) {
    lookup.looked_in.push_back("Ollama's store (" + *root + ")");
    TS_ASSIGN_OR_RETURN(std::optional<GgufModel> found, FindOllamaModel(*root, name));
    if (found) lookup.found.push_back(ResolvedFromGguf(std::move(*found)));
  }
  if (auto root = LmStudioModelsDir()) {
    lookup.looked_in.push_back("LM Studio's folder (" + *root + ")");
    for (GgufModel& m : FindLmStudioModels(*root, name)) {
      lookup.found.push_back(ResolvedFromGguf(std::move(m)));
    }
  }
  return lookup;
}

Expected<std::optional<ResolvedModel>> ResolveGgufPath(const std::string& as_given,
                                                       const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    TS_ASSIGN_OR_RETURN(GgufModel model, GgufModelOfFile(path, as_given, ModelLocation::kPath));
    return std::optional<ResolvedModel>(ResolvedFromGguf(std::move(model)));
  }
  if (!fs::is_directory(path, ec) || fs::exists(path + "/config.json", ec)) {
    return std::optional<ResolvedModel>();
  }
  const std::vector<std::string> files = GgufFileNamesIn(path);
  if (files.empty()) return std::optional<ResolvedModel>();
  if (files.size() > 1) {
    std::string list;
    for (const std::string& f : files) list += (list.empty() ? "" : ", ") + (path + "/" + f);
    return InvalidArgument(as_given + " holds " + std::to_string(files.size()) +
                           " GGUF files; name one: " + list);
  }
  const std::string file = (fs::path(path) / files[0]).string();
  TS_ASSIGN_OR_RETURN(GgufModel model, GgufModelOfFile(file, file, ModelLocation::kPath));
  return std::optional<ResolvedModel>(ResolvedFromGguf(std::move(model)));
}

namespace {

InstalledModel InstalledFromGguf(const GgufModel& model, std::string verification) {
  InstalledModel m;
  m.name = model.name;
  m.purpose = "-";  // known once the GGUF header is read, which listing does not do
  m.dtype = model.quantization.empty() ? "-" : model.quantization;
  m.size_bytes = model.size_bytes;
  m.verification = std::move(verification);
  m.location = model.location;
  m.file = model.path;
  return m;
}

}  // namespace

InstalledModel InstalledFromGgufFile(const ListedGgufFile& file, std::string verification) {
  if (file.model) return InstalledFromGguf(*file.model, std::move(verification));
  GgufModel shown;
  shown.name = file.name;
  shown.path = file.path;
  shown.size_bytes = file.size_bytes;
  shown.location = file.location;
  return InstalledFromGguf(shown, "refused: " + file.model.status().message());
}

std::vector<InstalledModel> ListGgufStoreModels(bool rehash) {
  std::vector<InstalledModel> rows;
  if (auto root = OllamaModelsDir()) {
    for (const ListedOllamaModel& listed : ListOllamaModels(*root, rehash)) {
      InstalledModel m;
      if (listed.model) {
        m = InstalledFromGguf(*listed.model, "verified");
      } else {
        m.name = listed.name.Shortest();
        m.purpose = "-";
        m.dtype = "-";
        m.location = ModelLocation::kOllama;
        m.file = listed.manifest_path;
        const Status& st = listed.model.status();
        m.verification =
            (st.code() == ErrorCode::kUnsupported ? "refused: " : "changed: ") + st.message();
      }
      m.size_bytes = listed.total_size;
      rows.push_back(std::move(m));
    }
  }
  if (auto root = LmStudioModelsDir()) {
    for (const ListedGgufFile& file : ListLmStudioModels(*root)) {
      rows.push_back(InstalledFromGgufFile(file, "unverified"));
    }
  }
  return rows;
}

}  // namespace tessera
