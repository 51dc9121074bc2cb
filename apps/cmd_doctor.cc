// `tessera doctor`: what will run tessera on this machine. The CPU backend first (the kernel
// family chosen and why, threads, memory), then the NPU: the NPUs found and one
// pass/info/warn/fail row per check with the command that fixes it.
//
//   tessera doctor                       # this machine
//   tessera doctor --model models/qwen   # memlock sized for that model
//   tessera doctor --json --root /tmp/fake-tree
//
// Exit code: 0 when no check fails (a machine without an NPU passes: the CPU backend runs),
// 1 when an NPU is present and one of its checks fails, 2 for bad usage.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "backend/cpu/cpu_report.h"
#include "backend/xdna/doctor.h"
#include "cli_args.h"
#include "commands.h"

namespace tessera {

int RunDoctorCommand(int argc, char** argv) {
  CliArgs args("doctor");
  args.AddString("root", "filesystem root to inspect (a fake tree for tests)", false, "/");
  args.AddString("model", "model directory: memlock must hold its files + 512 MiB");
  args.AddFlag("json",
               "print one JSON object {\"cpu\": {...}, \"devices\": [...], \"checks\": [...]}");
  if (Status st = args.Parse(argc, argv, 2); !st.ok()) return ReportError("doctor", st);
  if (args.help_requested()) {
    std::printf("%s", args.Usage().c_str());
    std::printf(
        "Reports the CPU backend (the kernel family chosen for this CPU and why, its kernels, "
        "threads, memory), then finds Ryzen AI NPUs and checks the amdxdna driver, firmware, "
        "IOMMU, /dev/accel access, the memlock limit and XRT with its NPU plugin.\nExit code: 0 "
        "when no check fails (no NPU is information, not a failure: the CPU backend runs), 1 "
        "when an NPU is present and one of its checks fails.\n");
    return 0;
  }
  DoctorOptions options;
  options.root = args.GetString("root");
  std::error_code ec;
  if (options.root.empty() || !std::filesystem::is_directory(options.root, ec)) {
    return ReportError("doctor", InvalidArgument("--root " + options.root +
                                                 ": not a directory; give the filesystem root "
                                                 "to inspect (default /)"));
  }
  if (args.Has("model")) {
    auto bytes = DirectoryBytes(args.GetString("model"));
    if (!bytes) {
      return ReportError("doctor", InvalidArgument("--model: " + bytes.status().message()));
    }
    options.model_bytes = *bytes;
  }
  const CpuBackendReport cpu = DescribeCpuBackend(options.root);
  const DoctorReport report = RunDoctor(options);
  std::string out;
  if (args.GetFlag("json")) {
    // The two reports come from separate libraries (the NPU's does not know the CPU backend):
    // "cpu" goes first, then the NPU report's own keys in their order.
    nlohmann::ordered_json j = {{"cpu", nlohmann::ordered_json::parse(CpuBackendReportJson(cpu))}};
    const nlohmann::ordered_json npu = nlohmann::ordered_json::parse(DoctorReportJson(report));
    for (auto it = npu.begin(); it != npu.end(); ++it) j[it.key()] = it.value();
    out = j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  } else {
    out = CpuBackendReportText(cpu) + "\n" + DoctorReportText(report);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return cpu.ready() && report.ok() ? 0 : 1;
}

}  // namespace tessera
