// Fuzzes the model catalog parser (catalog/models.json, or a user's catalog file).
#include <cstdint>
#include <string_view>

#include "catalog/catalog.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)tessera::ParseCatalog(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  return 0;
}
