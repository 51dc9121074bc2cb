// MappedFile: a read-only memory map of a whole file, unmapped on destruction.
//
//   TS_ASSIGN_OR_RETURN(MappedFile f, MappedFile::Open("model.safetensors"));
//   std::span<const uint8_t> bytes = f.bytes();
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"

namespace tessera {

class MappedFile {
 public:
  static Expected<MappedFile> Open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  void Reset();
  const uint8_t* data_ = nullptr;  // nullptr for an empty file
  size_t size_ = 0;
  std::string path_;
};

// Reads a whole (small) file into a string, refusing files larger than max_bytes.
Expected<std::string> ReadFileToString(const std::string& path, size_t max_bytes = 256u << 20);

bool FileExists(const std::string& path);

}  // namespace tessera
