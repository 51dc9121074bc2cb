#include "backend/xdna/fake/npu_device_flag.h"

#include <charconv>
#include <memory>

#include "backend/xdna/device.h"
#include "backend/xdna/fake/fake_device.h"

namespace tessera {
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

Expected<NpuDeviceChoice> ResolveNpuDevice(std::string_view text) {
  if (text.empty() || text == "xrt")
    return NpuDeviceChoice{false, "xrt", [] { return MakeXdnaDevice(); }};
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
  size_t memory_bytes = size_t{8} << 30;
  std::string_view rest =
      comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  while (!rest.empty()) {
    const size_t next = rest.find(',');
    const std::string_view option = rest.substr(0, next);
    rest = next == std::string_view::npos ? std::string_view() : rest.substr(next + 1);
    if (option.starts_with("memory-mib=")) {
      TS_ASSIGN_OR_RETURN(memory_bytes, ParseMemoryMib(option.substr(11)));
    } else {
      return InvalidArgument("--npu-device: unknown fake device option '" + std::string(option) +
                             "'; expected memory-mib=N");
    }
  }
  const XdnaGeneration g = *generation;
  return NpuDeviceChoice{
      true, FakeXdnaDevice::Name(g), [g, memory_bytes]() -> Expected<std::unique_ptr<XdnaDevice>> {
        return std::unique_ptr<XdnaDevice>(std::make_unique<FakeXdnaDevice>(g, memory_bytes));
      }};
}

}  // namespace tessera
