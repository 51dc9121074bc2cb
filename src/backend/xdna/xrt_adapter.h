// The XRT adapter: XdnaDevice over a real Ryzen AI NPU through XRT >= 2.17 (hardware contexts
// and runlists; ../shared/npu/FACTS.md 2.2). It exists only in builds that found such an XRT
// (CMake defines TESSERA_HAVE_XRT_ADAPTER); Debian 12's XRT 2.13 cannot drive an NPU, so the
// project's CI never compiles it. Each kernel of a program is an mlir-aie kernel of the
// program's xclbin: its instruction sequence goes to a cacheable buffer once, at OpenProgram,
// and every run passes (opcode 3, that buffer, its word count) before the run's own arguments,
// so Run::args[i] and AllocateBuffer's arg_index i are XRT's kernel argument 3 + i.
//
//   #ifdef TESSERA_HAVE_XRT_ADAPTER
//   TS_ASSIGN_OR_RETURN(auto dev, MakeXrtDevice());   // device 0, its generation from XRT
//   TS_ASSIGN_OR_RETURN(ProgramId p, dev->OpenProgram(program));
//   TS_ASSIGN_OR_RETURN(BufferId x, dev->AllocateBuffer(bytes, BufferKind::kData, p, 0, 0));
//   Run run{p, 0, {RunArg::Buffer(x), RunArg::Buffer(y)}};   // XRT: (3, instr, n, x, y)
//   #endif
#pragma once

#include <memory>

#include "backend/xdna/device.h"

namespace tessera {

// Opens XRT device 0. Errors name XRT's reason (no device, no plugin, unknown NPU) and point
// at `tessera doctor`.
Expected<std::unique_ptr<XdnaDevice>> MakeXrtDevice();

}  // namespace tessera
