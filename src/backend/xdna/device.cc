#include "backend/xdna/device.h"

#include <cstdlib>

#include "backend/xdna/fake_device.h"

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

#ifdef TESSERA_HAVE_XRT_ADAPTER
Expected<std::unique_ptr<XdnaDevice>> MakeXrtDevice();  // xrt_adapter.cc
#endif

Expected<std::unique_ptr<XdnaDevice>> MakeXdnaDevice() {
  if (const char* fake = std::getenv("TESSERA_XDNA_FAKE"); fake != nullptr && *fake != '\0') {
    auto generation = ParseGeneration(fake);
    if (!generation) return generation.status().WithContext("TESSERA_XDNA_FAKE");
    auto device = std::make_unique<FakeXdnaDevice>(*generation);
    if (const char* f = std::getenv("TESSERA_XDNA_FAKE_FAULT"); f != nullptr && *f != '\0') {
      auto fault = ParseFakeFault(f);
      if (!fault) return fault.status().WithContext("TESSERA_XDNA_FAKE_FAULT");
      device->InjectFault(*fault);
    }
    return std::unique_ptr<XdnaDevice>(std::move(device));
  }
#ifdef TESSERA_HAVE_XRT_ADAPTER
  return MakeXrtDevice();
#else
  return Unsupported(
      "no NPU device: this build of tessera has no XRT adapter (it needs XRT >= 2.17 with "
      "hardware contexts at build time), so it cannot drive an NPU; run 'tessera doctor' to see "
      "what this machine has, place layers on the cpu backend, or set TESSERA_XDNA_FAKE=xdna1|"
      "xdna2 to run on the fake device (CPU reference kernels, no NPU)");
#endif
}

}  // namespace tessera
