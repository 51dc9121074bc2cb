// Fuzzes the NPU instruction-sequence (txn) parser, then checks what parsed against both
// device generations as loading an artifact does.
#include <cstdint>
#include <span>

#include "backend/xdna/npu_target.h"
#include "backend/xdna/txn.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto txn = tessera::ParseTxnHeader(std::span<const uint8_t>(data, size));
  if (txn) {
    for (auto g : {tessera::XdnaGeneration::kXdna1, tessera::XdnaGeneration::kXdna2}) {
      (void)tessera::CheckTxnForTarget(*txn, tessera::NpuTargetFor(g));
    }
  }
  return 0;
}
