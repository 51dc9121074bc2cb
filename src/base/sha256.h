// SHA-256 (FIPS 180-4) and the Git blob id (SHA-1 of "blob <size>\0" + bytes), computed with
// OpenSSL's libcrypto. Incremental, so downloads can be hashed as they arrive.
//
//   Sha256 h;
//   h.Update(chunk1); h.Update(chunk2);
//   std::string hex = h.FinishHex();                     // 64 lowercase hex digits
//   TS_ASSIGN_OR_RETURN(std::string digest, Sha256File("/path/model.safetensors"));
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tessera {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(std::string_view bytes);
  void Update(const void* data, size_t size);
  // The digest as lowercase hex; the hasher is reset afterwards.
  std::string FinishHex();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

std::string Sha256Hex(std::string_view bytes);
// Hashes a whole file by streaming it (never loads it into memory at once). `hashed`, when
// set, is called after each 1 MiB read with the bytes hashed so far (for a progress bar).
Expected<std::string> Sha256File(const std::string& path,
                                 const std::function<void(uint64_t)>& hashed = {});
// The id Git (and the Hugging Face hub's "blobId") gives a file's contents.
Expected<std::string> GitBlobIdOfFile(const std::string& path);

}  // namespace tessera
