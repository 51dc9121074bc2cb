#include "backend/xdna/npu_target.h"

namespace tessera {

const NpuTarget& NpuTargetFor(XdnaGeneration generation) {
  static const NpuTarget kXdna1 = [] {
    NpuTarget t;
    t.generation = XdnaGeneration::kXdna1;
    t.columns = 4;
    t.hw_context_limit = 6;
    t.txn_device_generation = 3;
    t.int8_macs_per_core_cycle = 256;
    t.bf16_macs_per_core_cycle = 128;
    return t;
  }();
  static const NpuTarget kXdna2 = [] {
    NpuTarget t;
    t.generation = XdnaGeneration::kXdna2;
    t.columns = 8;
    t.hw_context_limit = 16;
    t.txn_device_generation = 4;
    t.int8_macs_per_core_cycle = 512;
    t.bf16_macs_per_core_cycle = 256;
    return t;
  }();
  return generation == XdnaGeneration::kXdna1 ? kXdna1 : kXdna2;
}

std::string_view GenerationName(XdnaGeneration generation) {
  return generation == XdnaGeneration::kXdna1 ? "xdna1" : "xdna2";
}

Expected<XdnaGeneration> ParseGeneration(std::string_view name) {
  if (name == "xdna1") return XdnaGeneration::kXdna1;
  if (name == "xdna2") return XdnaGeneration::kXdna2;
  return InvalidArgument("unknown NPU generation '" + std::string(name) +
                         "'; expected xdna1 (Phoenix, Hawk Point) or xdna2 (Strix Point, Strix "
                         "Halo, Krackan)");
}

}  // namespace tessera
