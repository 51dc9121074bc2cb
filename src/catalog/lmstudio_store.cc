#include "catalog/lmstudio_store.h"

#include <algorithm>
#include <filesystem>

#include "base/environment.h"

namespace tessera {
namespace fs = std::filesystem;
namespace {

// A folder or file name that cannot climb out of the models folder or surprise a shell.
bool IsPlainPart(std::string_view part) {
  if (part.empty() || part.size() > 255 || part.front() == '.') return false;
  for (char c : part) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

std::vector<std::string_view> SplitSlashes(std::string_view text) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t slash = text.find('/');
    parts.push_back(text.substr(0, slash));
    if (slash == std::string_view::npos) return parts;
    text = text.substr(slash + 1);
  }
}

std::vector<std::string> SortedSubfolders(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::error_code dir_ec;
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(".") && entry.is_directory(dir_ec)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

Expected<std::string> LmStudioModelsDir() {
  std::optional<std::string> home = ReadEnv(EnvVar::kHome);
  if (!home)
    return NotFound("HOME is not set, so LM Studio's folder (~/.lmstudio/models) is unknown");
  return *home + "/.lmstudio/models";
}

std::vector<GgufModel> FindLmStudioModels(const std::string& root, std::string_view text) {
  std::vector<std::string_view> parts = SplitSlashes(text);
  if (parts.size() < 2 || parts.size() > 3) return {};
  for (std::string_view part : parts) {
    if (!IsPlainPart(part)) return {};
  }
  const std::string repo_dir = root + "/" + std::string(parts[0]) + "/" + std::string(parts[1]);
  const std::string repo = std::string(parts[0]) + "/" + std::string(parts[1]);
  std::vector<std::string> files;
  if (parts.size() == 3) {
    if (!parts[2].ends_with(".gguf")) return {};
    std::error_code ec;
    if (fs::is_regular_file(repo_dir + "/" + std::string(parts[2]), ec)) {
      files.emplace_back(parts[2]);
    }
  } else {
    files = GgufFileNamesIn(repo_dir);
  }
  std::vector<GgufModel> found;
  for (const std::string& file : files) {
    auto model =
        GgufModelOfFile(repo_dir + "/" + file, repo + "/" + file, ModelLocation::kLmStudio);
    if (model) found.push_back(std::move(*model));
  }
  return found;
}

namespace {

ListedGgufFile ListFile(const std::string& path, const std::string& name, ModelLocation location) {
  ListedGgufFile listed;
  listed.name = name;
  listed.path = path;
  listed.location = location;
  std::error_code ec;
  listed.size_bytes = fs::file_size(path, ec);
  listed.model = GgufModelOfFile(path, name, location);
  return listed;
}

}  // namespace

std::vector<ListedGgufFile> ListLmStudioModels(const std::string& root) {
  std::vector<ListedGgufFile> listed;
  for (const std::string& publisher : SortedSubfolders(root)) {
    for (const std::string& repo : SortedSubfolders(fs::path(root) / publisher)) {
      const std::string repo_dir = root + "/" + publisher + "/" + repo;
      for (const std::string& file : GgufFileNamesIn(repo_dir)) {
        listed.push_back(ListFile(repo_dir + "/" + file, publisher + "/" + repo + "/" + file,
                                  ModelLocation::kLmStudio));
      }
    }
  }
  return listed;
}

std::vector<ListedGgufFile> ListGgufFolder(const std::string& dir, ModelLocation location) {
  std::vector<ListedGgufFile> listed;
  for (const std::string& file : GgufFileNamesIn(dir)) {
    // Absolute, so that the name is a path wherever it is given (LooksLikePath).
    std::error_code ec;
    const std::string path = fs::absolute(fs::path(dir) / file, ec).lexically_normal().string();
    listed.push_back(ListFile(path, path, location));
  }
  return listed;
}

}  // namespace tessera
