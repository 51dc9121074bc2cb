// NpuTarget: what a Ryzen AI NPU generation offers a plan, in one place (figures and sources in
// ../shared/npu/FACTS.md, sections 3.2 and 4). Doctor reports a device's generation; the
// planner, the artifact checks and the devices read the limits from here.
//
//   const NpuTarget& t = NpuTargetFor(XdnaGeneration::kXdna1);
//   t.columns          // 4
//   t.core_data_bytes  // 65536
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tessera {

enum class XdnaGeneration {
  kXdna1,  // AIE2, "npu1": Phoenix, Hawk Point (PCI 1022:1502)
  kXdna2,  // AIE2P, "npu4/5/6": Strix Point, Strix Halo, Krackan (PCI 1022:17f0)
};

struct NpuTarget {
  XdnaGeneration generation = XdnaGeneration::kXdna1;
  int columns = 4;                        // columns an application may use
  int core_rows = 4;                      // compute rows per column (rows 2-5)
  int64_t core_data_bytes = 64 * 1024;    // data memory per core tile
  int64_t mem_tile_bytes = 512 * 1024;    // per memory tile (one per column)
  int64_t core_stack_bytes = 1024;        // default stack of a core program
  int64_t core_heap_bytes = 1024;         // default heap of a core program
  int core_dma_in = 2, core_dma_out = 2;  // DMA channels per core tile
  int mem_tile_dma_in = 6, mem_tile_dma_out = 6;
  int shim_dma_in = 2, shim_dma_out = 2;  // per column, the path to and from DDR
  int core_buffer_descriptors = 16;       // per core tile
  int mem_tile_buffer_descriptors = 48;   // per memory tile
  int64_t dma_granule_bytes = 4;          // strides and sizes in 32-bit words
  int hw_context_limit = 6;               // hardware contexts the driver allows
  int xclbin_limit = 16;                  // xclbins one process may register
  int txn_device_generation = 3;          // devGen in an instruction sequence's header
  int int8_macs_per_core_cycle = 256;     // per core per cycle: 256 (npu1), 512 (npu2)
  int bf16_macs_per_core_cycle = 128;     // 128 (npu1, 4x8x4), 256 (npu2, 4x8x8)
};

// The limits of a generation (FACTS.md 3.2).
const NpuTarget& NpuTargetFor(XdnaGeneration generation);

// "xdna1" / "xdna2", as doctor's JSON, the stats and --npu-device fake:GEN spell them.
std::string_view GenerationName(XdnaGeneration generation);
Expected<XdnaGeneration> ParseGeneration(std::string_view name);

}  // namespace tessera
