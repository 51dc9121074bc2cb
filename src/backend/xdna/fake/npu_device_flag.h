// --npu-device: which XDNA device a program's xdna layers run on, for the programs that offer
// the flag (generate, chat, bench, serve and its worker). "" or "xrt": the XRT device
// (MakeXdnaDevice, backend/xdna/device.h); "fake:xdna1" or "fake:xdna2": the fake device
// (fake_device.h: the NPU program's CPU reference kernels; no NPU executes anything), with
// "memory-mib=N" after a comma (what its buffers may hold, default 8192, to show models that do
// not fit beside each other). Anything else is an error naming what exists. The product's
// device code knows only XRT; this library is linked only where the flag is resolved.
//
//   TS_ASSIGN_OR_RETURN(NpuDeviceChoice d, ResolveNpuDevice("fake:xdna2,memory-mib=64"));
//   options.npu.device = "fake:xdna2,memory-mib=64";
//   options.npu.make_device = d.make;   // called when the first xdna layers load
#pragma once

#include <string>
#include <string_view>

#include "backend/backend.h"
#include "base/status.h"

namespace tessera {

struct NpuDeviceChoice {
  bool fake = false;     // the fake device: nothing runs on an NPU
  std::string name;      // for logs and /ready, e.g. "fake xdna1 (CPU reference kernels; ...)"
  XdnaDeviceMaker make;  // for NpuOptions::make_device
};
Expected<NpuDeviceChoice> ResolveNpuDevice(std::string_view text);

}  // namespace tessera
