// `tessera doctor`: is this machine's NPU ready for tessera? Prints the NPUs found and one
// pass/warn/fail row per check with the command that fixes it.
//
//   tessera doctor                       # this machine
//   tessera doctor --model models/qwen   # memlock sized for that model
//   tessera doctor --json --root /tmp/fake-tree
//
// Exit code: 0 when no check fails, 1 when one does, 2 for bad usage.
#include <cstdio>
#include <filesystem>
#include <string>

#include "backend/xdna/doctor.h"
#include "cli_args.h"
#include "commands.h"

namespace tessera {

int RunDoctorCommand(int argc, char** argv) {
  CliArgs args("doctor");
  args.AddString("root", "filesystem root to inspect (a fake tree for tests)", false, "/");
  args.AddString("model", "model directory: memlock must hold its files + 512 MiB");
  args.AddFlag("json", "print one JSON object {\"devices\": [...], \"checks\": [...]}");
  if (Status st = args.Parse(argc, argv, 2); !st.ok()) return ReportError("doctor", st);
  if (args.help_requested()) {
    std::printf("%s", args.Usage().c_str());
    std::printf(
        "Finds Ryzen AI NPUs and checks the amdxdna driver, firmware, IOMMU, /dev/accel access, "
        "the memlock limit and XRT with its NPU plugin.\nExit code: 0 when no check fails, 1 "
        "when one does (without an NPU tessera uses the CPU backend).\n");
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
  DoctorReport report = RunDoctor(options);
  std::string out = args.GetFlag("json") ? DoctorReportJson(report) : DoctorReportText(report);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return report.ok() ? 0 : 1;
}

}  // namespace tessera
