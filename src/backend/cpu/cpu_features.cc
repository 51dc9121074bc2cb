#include "backend/cpu/cpu_features.h"

#include <cstdlib>

namespace tessera {

std::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar:
      return "scalar";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "scalar";
}

std::optional<CpuIsa> ParseCpuIsa(std::string_view name) {
  if (name == "scalar") return CpuIsa::kScalar;
  if (name == "avx2") return CpuIsa::kAvx2;
  if (name == "avx512") return CpuIsa::kAvx512;
  return std::nullopt;
}

CpuIsa DetectCpuIsa() {
  static const CpuIsa detected = [] {
#if defined(__x86_64__)
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                __builtin_cpu_supports("f16c");
    bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vnni");
    if (avx512) return CpuIsa::kAvx512;
    if (avx2) return CpuIsa::kAvx2;
#endif
    return CpuIsa::kScalar;
  }();
  return detected;
}

bool CpuSupports(CpuIsa isa) {
  return static_cast<int>(isa) <= static_cast<int>(DetectCpuIsa());
}

CpuIsa SelectCpuIsa() {
  CpuIsa isa = DetectCpuIsa();
  if (const char* env = std::getenv("TESSERA_CPU_ISA")) {
    std::optional<CpuIsa> forced = ParseCpuIsa(env);
    if (forced && CpuSupports(*forced)) isa = *forced;
  }
  return isa;
}

}  // namespace tessera
