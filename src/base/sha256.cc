#include "base/sha256.h"

#include <openssl/evp.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace tessera {
namespace {

std::string ToHex(const unsigned char* digest, unsigned int size) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(size * 2);
  for (unsigned int i = 0; i < size; ++i) {
    hex.push_back(kDigits[digest[i] >> 4]);
    hex.push_back(kDigits[digest[i] & 15]);
  }
  return hex;
}

// Streams the file at `path` through the digest `md`; a Git blob id first hashes the header
// "blob <size>\0", so the size is taken from the open file.
Expected<std::string> DigestFile(const std::string& path, const EVP_MD* md, bool git_blob_header,
                                 const std::function<void(uint64_t)>& hashed = {}) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return IoError("cannot open " + path + ": " + std::strerror(errno));
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, md, nullptr);
  if (git_blob_header) {
    struct stat st {};
    if (fstat(fileno(f), &st) != 0) {
      std::fclose(f);
      EVP_MD_CTX_free(ctx);
      return IoError("cannot stat " + path + ": " + std::strerror(errno));
    }
    std::string header = "blob " + std::to_string(static_cast<uint64_t>(st.st_size));
    header.push_back('\0');
    EVP_DigestUpdate(ctx, header.data(), header.size());
  }
  std::vector<unsigned char> buffer(1 << 20);
  bool read_error = false;
  uint64_t total = 0;
  while (true) {
    size_t n = std::fread(buffer.data(), 1, buffer.size(), f);
    if (n > 0) EVP_DigestUpdate(ctx, buffer.data(), n);
    total += n;
    if (hashed) hashed(total);
    if (n < buffer.size()) {
      read_error = std::ferror(f) != 0;
      break;
    }
  }
  std::fclose(f);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(ctx, digest, &size);
  EVP_MD_CTX_free(ctx);
  if (read_error) return IoError("read error while hashing " + path);
  return ToHex(digest, size);
}

}  // namespace

struct Sha256::State {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  state_->ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr);
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(state_->ctx);
}

void Sha256::Update(std::string_view bytes) {
  Update(bytes.data(), bytes.size());
}

void Sha256::Update(const void* data, size_t size) {
  if (size > 0) EVP_DigestUpdate(state_->ctx, data, size);
}

std::string Sha256::FinishHex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(state_->ctx, digest, &size);
  EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr);
  return ToHex(digest, size);
}

std::string Sha256Hex(std::string_view bytes) {
  Sha256 h;
  h.Update(bytes);
  return h.FinishHex();
}

Expected<std::string> Sha256File(const std::string& path,
                                 const std::function<void(uint64_t)>& hashed) {
  return DigestFile(path, EVP_sha256(), false, hashed);
}

Expected<std::string> GitBlobIdOfFile(const std::string& path) {
  return DigestFile(path, EVP_sha1(), true);
}

}  // namespace tessera
