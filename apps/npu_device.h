// This program's --npu-device. tessera's definition (npu_device.cc) is ResolveNpuDevice: XRT or
// the fake device. A test program links its own definition in its place
// (tests/support/npu_device_with_faults.cc, which adds fault injection), so the product binary
// carries no fault code and no hook for one.
//
//   TS_ASSIGN_OR_RETURN(NpuDeviceChoice d, ProgramNpuDevice(args.GetString("npu-device")));
#pragma once

#include <string_view>

#include "backend/xdna/fake/npu_device_flag.h"

namespace tessera {

Expected<NpuDeviceChoice> ProgramNpuDevice(std::string_view text);

}  // namespace tessera
