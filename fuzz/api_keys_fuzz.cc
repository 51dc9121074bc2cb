// Fuzzes the --api-keys file parser (ParseApiKeys, src/server/api_keys.h). Beyond never
// crashing, what it accepts must hold the file's rules: each name 1-64 of [A-Za-z0-9_.-], each
// key 16-512 printable ASCII bytes without spaces, no name or key twice, at least one key.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "server/api_keys.h"

namespace ts = tessera::server;

namespace {

bool NameOk(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (unsigned char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool KeyOk(const std::string& key) {
  if (key.size() < ts::kMinApiKeyBytes || key.size() > ts::kMaxApiKeyBytes) return false;
  for (unsigned char c : key) {
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

[[noreturn]] void Broken(const char* rule) {
  std::fprintf(stderr, "ParseApiKeys accepted a file that breaks a rule: %s\n", rule);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto keys = ts::ParseApiKeys(text);
  if (!keys) {
    tessera::fuzz::Note("api_keys", keys.status().message());
    return 0;
  }
  tessera::fuzz::Note("api_keys", "ok");
  if (keys->empty()) Broken("at least one key");
  std::set<std::string> names;
  std::set<std::string> secrets;
  for (const ts::ApiKey& k : *keys) {
    if (!NameOk(k.name)) Broken("name charset and length");
    if (!KeyOk(k.key)) Broken("key bytes and length");
    if (!names.insert(k.name).second) Broken("unique names");
    if (!secrets.insert(k.key).second) Broken("unique keys");
  }
  return 0;
}
