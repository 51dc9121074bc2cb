#include "backend/xdna/device.h"

#ifdef TESSERA_HAVE_XRT_ADAPTER
#include "backend/xdna/xrt_adapter.h"
#endif

namespace tessera {

std::string_view RunStateName(RunState state) {
  switch (state) {
    case RunState::kCompleted:
      return "completed";
    case RunState::kTimeout:
      return "timeout";
    case RunState::kAborted:
      return "aborted";
    case RunState::kDeviceLost:
      return "device lost";
  }
  return "unknown";
}

Expected<std::unique_ptr<XdnaDevice>> MakeXdnaDevice() {
#ifdef TESSERA_HAVE_XRT_ADAPTER
  return MakeXrtDevice();
#else
  return Unsupported(
      "no NPU device: this build of tessera has no XRT adapter (it needs XRT >= 2.17 with "
      "hardware contexts at build time), so it cannot drive an NPU; run 'tessera doctor' to see "
      "what this machine has, place layers on the cpu backend, or pass --npu-device fake:xdna1 "
      "(or fake:xdna2) to run on the fake device (CPU reference kernels, no NPU)");
#endif
}

}  // namespace tessera
