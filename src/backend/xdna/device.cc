#include "backend/xdna/device.h"

#include "backend/backend.h"

#include <charconv>
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

namespace {

// "N" of "memory-mib=N": 1 to 1048576.
Expected<size_t> ParseMemoryMib(std::string_view text) {
  uint64_t mib = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), mib);
  if (ec != std::errc() || end != text.data() + text.size() || mib == 0 || mib > (1u << 20)) {
    return InvalidArgument("memory-mib='" + std::string(text) +
                           "': expected MiB from 1 to 1048576");
  }
  return static_cast<size_t>(mib) << 20;
}

}  // namespace

Expected<NpuDeviceSpec> ParseNpuDeviceSpec(std::string_view text) {
  NpuDeviceSpec spec;
  if (text.empty() || text == "xrt") return spec;
  constexpr std::string_view kFake = "fake:";
  if (!text.starts_with(kFake)) {
    return InvalidArgument("--npu-device '" + std::string(text) +
                           "': expected xrt, fake:xdna1 or fake:xdna2 (the fake device runs the "
                           "NPU program's CPU reference kernels)");
  }
  text.remove_prefix(kFake.size());
  const size_t comma = text.find(',');
  auto generation = ParseGeneration(text.substr(0, comma));
  if (!generation) return generation.status().WithContext("--npu-device");
  spec.fake = *generation;
  std::string_view rest =
      comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  while (!rest.empty()) {
    const size_t next = rest.find(',');
    const std::string_view option = rest.substr(0, next);
    rest = next == std::string_view::npos ? std::string_view() : rest.substr(next + 1);
    if (option.starts_with("memory-mib=")) {
      TS_ASSIGN_OR_RETURN(spec.fake_memory_bytes, ParseMemoryMib(option.substr(11)));
    } else if (option.starts_with("fault=")) {
      spec.fault = std::string(option.substr(6));
      TS_RETURN_IF_ERROR(ParseFakeFault(spec.fault).status());
    } else {
      return InvalidArgument("--npu-device: unknown fake device option '" + std::string(option) +
                             "'; expected memory-mib=N or fault=KIND@CHAIN");
    }
  }
  return spec;
}

Expected<NpuDeviceInfo> CheckNpuDevice(std::string_view text) {
  TS_ASSIGN_OR_RETURN(NpuDeviceSpec spec, ParseNpuDeviceSpec(text));
  if (!spec.fake) return NpuDeviceInfo{false, "xrt"};
  return NpuDeviceInfo{true, "fake " + std::string(GenerationName(*spec.fake)) +
                                 " (CPU reference kernels; no NPU executes anything)"};
}

Expected<std::unique_ptr<XdnaDevice>> MakeXdnaDevice(const NpuDeviceSpec& spec) {
  if (spec.fake) {
    auto device = std::make_unique<FakeXdnaDevice>(*spec.fake, spec.fake_memory_bytes);
    if (!spec.fault.empty()) {
      TS_ASSIGN_OR_RETURN(FakeFault fault, ParseFakeFault(spec.fault));
      device->InjectFault(fault);
    }
    return std::unique_ptr<XdnaDevice>(std::move(device));
  }
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
