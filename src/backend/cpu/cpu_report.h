// What the cpu backend will run on this machine, for `tessera doctor`: the kernel family
// DetectCpuIsa() chooses (the backend's one dispatch point) and why, the CPU features behind
// it, the kernels of that family, the threads and the memory.
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

namespace tessera {

struct CpuBackendReport {
  CpuIsa isa = CpuIsa::kScalar;      // what the backend uses unless --cpu-isa says otherwise
  std::string reason;                // why that family ("the CPU has AVX2, FMA and F16C ...")
  std::vector<std::string> present;  // CPUID features found, probe order
  std::vector<std::string> missing;  // probed and absent
  std::string supported;             // every family this CPU runs, best first
  std::vector<std::string> kernels;  // "matmul f32", "attention blocked", ... of that family
  std::string decode_prefetch;       // AVX-512 families only; empty otherwise
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

}  // namespace tessera
