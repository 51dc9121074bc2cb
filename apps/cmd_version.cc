// `tessera --version` / `tessera version`: what this binary is and what it will run here.
//
//   $ tessera --version
//   tessera 0.1.0
//   commit       3f2a9c1d0b7e
//   build        Release, GNU 12.2.0
//   cpu kernels  avx512 (this CPU runs avx512, avx2, scalar)
//   cpu prefetch l2-16k (decode weights)
//   cpu caches   L1d 48.0 KiB, L2 2.0 MiB, L3 260.0 MiB
#include <cstdio>
#include <string>

#include "backend/cpu/cpu_caches.h"
#include "backend/cpu/cpu_features.h"
#include "build_info.h"
#include "cli_args.h"
#include "commands.h"

namespace tessera {

int RunVersionCommand(int argc, char** argv) {
  CliArgs args("version");
  if (Status st = args.Parse(argc, argv, 2); !st.ok()) return ReportError("version", st);
  if (args.help_requested()) {
    std::printf("%s", args.Usage().c_str());
    std::printf(
        "Prints the version, the git commit it was built from (\"-dirty\": with uncommitted "
        "changes; \"unknown\": built outside a git checkout), the build type and compiler, and "
        "the cpu backend's kernel family on this machine (the one it uses unless --cpu-isa says "
        "otherwise; `tessera doctor` says why), how that family's decode kernels prefetch "
        "weights here (l2-16k, l2-next-tile or nta-next-tile on avx512, chosen from the CPU's "
        "vendor and features; near-only on avx2) and the cache sizes it measured (L1d and L2 "
        "per core, L3 shared).\n");
    return 0;
  }
  // The same dispatch point the cpu backend uses (MakeCpuBackend: KernelsFor(DetectCpuIsa())).
  const CpuIsa isa = DetectCpuIsa();
  std::printf(
      "tessera %s\ncommit       %s\nbuild        %s, %s\ncpu kernels  %s (this CPU runs %s)\n"
      "cpu prefetch %s (decode weights)\ncpu caches   %s\n",
      BuildVersion(), BuildGitCommit(), BuildType(), BuildCompiler(),
      std::string(CpuIsaName(isa)).c_str(), SupportedCpuIsaNames().c_str(),
      std::string(DecodePrefetchName(isa)).c_str(), CpuCachesText(CpuCacheSizes()).c_str());
  return 0;
}

}  // namespace tessera
