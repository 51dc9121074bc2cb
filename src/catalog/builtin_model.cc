#include "catalog/builtin_model.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/mapped_file.h"
#include "catalog/builtin_model_files.h"
#include "catalog/model_store.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

bool FileHoldsExactly(const std::string& path, const EmbeddedFile& file) {
  std::error_code ec;
  if (fs::file_size(path, ec) != file.size || ec) return false;
  auto bytes = ReadFileToString(path, file.size);
  return bytes && bytes->size() == file.size &&
         std::memcmp(bytes->data(), file.data, file.size) == 0;
}

Status WriteFile(const std::string& path, const EmbeddedFile& file) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(file.data), static_cast<std::streamsize>(file.size));
  out.close();
  if (!out) return IoError("cannot write " + path + " (the built-in demo model's files)");
  return Status::Ok();
}

}  // namespace

Expected<std::string> MaterializeBuiltinModel() {
  TS_ASSIGN_OR_RETURN(std::string models_dir, ModelsDir());
  const std::string parent = models_dir + "/.builtin";
  const std::string dir = parent + "/" + kBuiltinModelName;
  bool current = true;
  for (size_t i = 0; i < kBuiltinModelFilesCount && current; ++i) {
    current = FileHoldsExactly(dir + "/" + kBuiltinModelFiles[i].name, kBuiltinModelFiles[i]);
  }
  if (current) return dir;
  // Written whole into a staging folder and swapped in, so that a reader never sees half of it
  // (two processes doing this at once each swap in a complete copy).
  const std::string staging = dir + ".staging-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec) {
    return IoError("cannot create " + staging + " for the built-in demo model: " + ec.message() +
                   "; set TESSERA_MODELS to a writable directory");
  }
  for (size_t i = 0; i < kBuiltinModelFilesCount; ++i) {
    Status st = WriteFile(staging + "/" + kBuiltinModelFiles[i].name, kBuiltinModelFiles[i]);
    if (!st.ok()) {
      fs::remove_all(staging, ec);
      return st;
    }
  }
  Status st = SwapDirectoryIntoPlace(staging, dir);
  if (!st.ok()) fs::remove_all(staging, ec);
  TS_RETURN_IF_ERROR(st);
  return dir;
}

}  // namespace tessera
