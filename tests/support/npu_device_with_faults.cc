// The --npu-device of tessera_with_npu_faults, a test program: tessera's commands (apps/main.cc
// and the tessera_cli library) with this definition of ProgramNpuDevice (apps/npu_device.h) in
// place of tessera's. Its grammar is tessera's plus ",fault=KIND@CHAIN" options
// (ParseInjectedFault), each fired once by a FaultInjectingDevice around the device the rest
// names. `serve` passes --npu-device to its worker verbatim and the worker is this program
// again, so the faults reach the process that runs the layers.
//
//   tessera_with_npu_faults serve --model m=DIR --npu-device fake:xdna2,fault=timeout@12 ...
#include <string>
#include <vector>

#include "fault_injecting_device.h"
#include "npu_device.h"

namespace tessera {

Expected<NpuDeviceChoice> ProgramNpuDevice(std::string_view text) {
  std::string rest;
  std::vector<test::InjectedFault> faults;
  constexpr std::string_view kFault = "fault=";
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (part.starts_with(kFault)) {
      TS_ASSIGN_OR_RETURN(test::InjectedFault f,
                          test::ParseInjectedFault(part.substr(kFault.size())));
      faults.push_back(f);
    } else {
      rest += (rest.empty() ? "" : ",") + std::string(part);
    }
  }
  TS_ASSIGN_OR_RETURN(NpuDeviceChoice choice, ResolveNpuDevice(rest));
  if (!faults.empty()) {
    choice.make = test::FaultInjectingDevice::Maker(std::move(choice.make), std::move(faults));
  }
  return choice;
}

}  // namespace tessera
