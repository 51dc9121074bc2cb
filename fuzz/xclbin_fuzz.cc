// Fuzzes the xclbin container parser (NPU program artifacts).
#include <cstdint>
#include <span>

#include "backend/xdna/xclbin.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)tessera::ParseXclbin(std::span<const uint8_t>(data, size));
  return 0;
}
