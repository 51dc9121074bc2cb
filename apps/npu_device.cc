#include "npu_device.h"

namespace tessera {

Expected<NpuDeviceChoice> ProgramNpuDevice(std::string_view text) {
  return ResolveNpuDevice(text);
}

}  // namespace tessera
