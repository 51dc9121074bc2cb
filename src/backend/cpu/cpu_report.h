// What the cpu backend will run on this machine, for `tessera doctor`: the kernel family
// DetectCpuIsa() chooses (the backend's one dispatch point) and why, the CPU features behind
// it, the kernels of that family and their decode prefetch, the cache sizes, the threads and
// the memory.
//
//   CpuBackendReport cpu = DescribeCpuBackend("/");   // memory from /proc/meminfo
//   std::printf("%s", CpuBackendReportText(cpu).c_str());
//   std::string json = CpuBackendReportJson(cpu);     // {"isa": "avx512", ...}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_caches.h"

namespace tessera {

struct CpuBackendReport {
  CpuIsa isa = CpuIsa::kScalar;      // what the backend uses unless --cpu-isa says otherwise
  std::string reason;                // why that family ("the CPU has AVX2, FMA and F16C ...")
  std::vector<std::string> present;  // CPUID features found, probe order
  std::vector<std::string> missing;  // probed and absent
  std::string supported;             // every family this CPU runs, best first
  std::vector<std::string> kernels;  // "matmul f32", "attention blocked", ... of that family
  std::string decode_prefetch;       // DecodePrefetchName(isa): "l2-16k", "near-only", ...
  CpuCaches caches{};                // CpuCacheSizes()
  int threads = 0;                   // the backend's pool size when not told (hardware threads)
  // From <root>/proc/meminfo (MemTotal, MemAvailable); unset when unreadable.
  std::optional<uint64_t> memory_total_bytes{};
  std::optional<uint64_t> memory_available_bytes{};
  // The cpu backend needs nothing beyond the CPU itself: scalar kernels always exist.
  bool ready() const { return true; }
};

// `root` is the filesystem root /proc/meminfo is read under (tests: a fake tree).
CpuBackendReport DescribeCpuBackend(const std::string& root);

// A few indented lines under "CPU backend:".
std::string CpuBackendReportText(const CpuBackendReport& report);
// One JSON object, fixed key order, indented 2 (nested at depth 1 by the caller).
std::string CpuBackendReportJson(const CpuBackendReport& report);

// The kernel choice of a cpu backend running `isa` here, for the model-load log:
// "avx512 kernels, decode prefetch l2-16k".
std::string CpuKernelChoiceText(CpuIsa isa);

}  // namespace tessera
