// Fuzzes the parser of the hub's revision listing (`tessera pull`; untrusted network input).
#include <cstdint>
#include <string_view>

#include "catalog/pull.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)tessera::ParseHubRevision(std::string_view(reinterpret_cast<const char*>(data), size),
                                  "org/model");
  return 0;
}
