#include "backend/xdna/device.h"

#include <charconv>
#include <cstdlib>
#include <string_view>

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
    // TESSERA_XDNA_FAKE_MEMORY_MB: what the fake device's buffers may hold (default 8 GiB), to
    // show what happens when models do not fit beside each other.
    size_t memory = size_t{8} << 30;
    if (const char* m = std::getenv("TESSERA_XDNA_FAKE_MEMORY_MB"); m != nullptr && *m != '\0') {
      const std::string_view text(m);
      uint64_t mib = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), mib);
      if (ec != std::errc() || end != text.data() + text.size() || mib == 0 || mib > (1u << 20)) {
        return InvalidArgument("TESSERA_XDNA_FAKE_MEMORY_MB='" + std::string(text) +
                               "': expected MiB from 1 to 1048576");
      }
      memory = static_cast<size_t>(mib) << 20;
    }
    auto device = std::make_unique<FakeXdnaDevice>(*generation, memory);
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
