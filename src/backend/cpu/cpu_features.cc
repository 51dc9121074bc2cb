#include "backend/cpu/cpu_features.h"

#include <cstdlib>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tessera {

namespace {

struct CpuFlags {
  bool avx2 = false;
  bool avx_vnni = false;
  bool avx512 = false;
  bool amx = false;
  CpuTraits traits{};
  std::vector<CpuFeature> features;  // every CPUID feature the families above are built from
};

#if defined(__x86_64__)
// AMX-TILE and AMX-INT8 (CPUID leaf 7 EDX bits 24 and 25), the tile state enabled in XCR0
// (bits 17 and 18) and the permission to use it granted to this process: Linux leaves tile
// data out of a process's signal frames until it asks (arch_prctl ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA), and an AMX instruction before that faults.
bool ProbeAmx() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  if ((d & (1u << 24)) == 0 || (d & (1u << 25)) == 0) return false;
  if (!__get_cpuid(1, &a, &b, &c, &d) || (c & (1u << 27)) == 0) return false;  // OSXSAVE
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & (3u << 17)) != (3u << 17)) return false;
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtileData = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) == 0;
#else
  return false;
#endif
}

// CPUID leaf 0's vendor string is EBX, EDX, ECX: "Auth" "enti" "cAMD".
bool VendorIsAmd() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
  return b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
}
#endif

const CpuFlags& Flags() {
  static const CpuFlags flags = [] {
    CpuFlags f;
#if defined(__x86_64__)
    __builtin_cpu_init();
    // F16C and AVX-VNNI straight from CPUID: clang 14's __builtin_cpu_supports knows neither
    // name (the fuzz build uses clang 14). F16C: leaf 1 ECX bit 29; AVX-VNNI: leaf 7
    // subleaf 1 EAX bit 4.
    unsigned a = 0, b = 0, c = 0, d = 0;
    const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
    const bool vnni = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) != 0;
    // __builtin_cpu_supports needs a string literal, hence one line per feature.
    f.features = {{"avx2", __builtin_cpu_supports("avx2") != 0},
                  {"fma", __builtin_cpu_supports("fma") != 0},
                  {"f16c", f16c},
                  {"avx-vnni", vnni},
                  {"avx512f", __builtin_cpu_supports("avx512f") != 0},
                  {"avx512bw", __builtin_cpu_supports("avx512bw") != 0},
                  {"avx512vl", __builtin_cpu_supports("avx512vl") != 0},
                  {"avx512dq", __builtin_cpu_supports("avx512dq") != 0},
                  {"avx512vnni", __builtin_cpu_supports("avx512vnni") != 0},
                  // Last, and not part of any family: only matmul_bf16_dot needs it.
                  {"avx512bf16", __builtin_cpu_supports("avx512bf16") != 0}};
    constexpr size_t kAvx512First = 4, kAvx512End = 9, kAvx512Bf16 = 9;
    auto all = [&f](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        if (!f.features[i].present) return false;
      }
      return true;
    };
    f.avx2 = all(0, 3);
    f.avx_vnni = f.avx2 && vnni;
    f.avx512 = f.avx2 && all(kAvx512First, kAvx512End);
    f.amx = f.avx512 && ProbeAmx();
    // Probed (and its permission asked for) only on top of the whole AVX-512 set.
    if (f.avx512) f.features.push_back({"amx-tile+amx-int8", f.amx});
    f.traits.amd = VendorIsAmd();
    f.traits.avx512 = f.avx512;
    f.traits.avx_vnni = vnni;
    f.traits.avx512_bf16 = f.avx512 && f.features[kAvx512Bf16].present;
#endif
    return f;
  }();
  return flags;
}

}  // namespace

CpuIsa DetectCpuIsa() {
  const CpuFlags& f = Flags();
  if (f.amx) return CpuIsa::kAvx512Amx;
  if (f.avx512) return CpuIsa::kAvx512;
  if (f.avx_vnni) return CpuIsa::kAvx2Vnni;
  if (f.avx2) return CpuIsa::kAvx2;
  return CpuIsa::kScalar;
}

const std::vector<CpuFeature>& CpuFeatures() {
  return Flags().features;
}

std::string CpuIsaReason(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512Amx:
      return "the CPU has AVX-512 (F, BW, VL, DQ, VNNI) and AMX-TILE/AMX-INT8 granted by the "
             "kernel";
    case CpuIsa::kAvx512:
      return "the CPU has AVX-512 F, BW, VL, DQ and VNNI with AVX2, FMA and F16C";
    case CpuIsa::kAvx2Vnni:
      return "the CPU has AVX2, FMA, F16C and AVX-VNNI but not the whole AVX-512 set (F, BW, "
             "VL, DQ, VNNI)";
    case CpuIsa::kAvx2:
      return "the CPU has AVX2, FMA and F16C but neither the whole AVX-512 set (F, BW, VL, DQ, "
             "VNNI) nor AVX-VNNI";
    case CpuIsa::kScalar:
#if defined(__x86_64__)
      return "the CPU lacks one of AVX2, FMA and F16C";
#else
      return "not an x86-64 build: only the portable kernels exist";
#endif
  }
  return "";
}

bool CpuSupports(CpuIsa isa) {
  const CpuFlags& f = Flags();
  switch (isa) {
    case CpuIsa::kScalar:
      return true;
    case CpuIsa::kAvx2:
      return f.avx2;
    case CpuIsa::kAvx2Vnni:
      return f.avx_vnni;
    case CpuIsa::kAvx512:
      return f.avx512;
    case CpuIsa::kAvx512Amx:
      return f.amx;
  }
  return false;
}

const CpuTraits& ProbedCpuTraits() {
  return Flags().traits;
}

// Zen 4 and Zen 5 both have AVX-512 (F, BW, VL, DQ, VNNI, BF16); AVX-VNNI, the VEX form of
// vpdpbusd, is new in Zen 5 (GCC's znver5 target adds AVXVNNI, MOVDIRI, MOVDIR64B,
// AVX512VP2INTERSECT and PREFETCHI to znver4's set: "AMD Zen 5 Details Emerge with GCC
// 'Znver5' Patch", techpowerup.com/318991, 2024-02-12; AMD's AOCL user guide 57404 lists
// AVX512, AVX512_VNNI and AVX512_BF16 as "Zen4+"). So AVX-VNNI tells the two apart, and a
// later AMD core with both keeps Zen 5's setting, as the family rule did (family 1Ah and up).
DecodeFarPrefetch ChooseDecodeFarPrefetch(const CpuTraits& t) {
  if (!t.amd || !t.avx512) return DecodeFarPrefetch::kL2Fixed;
  return t.avx_vnni ? DecodeFarPrefetch::kNonTemporalNextTile : DecodeFarPrefetch::kL2NextTile;
}

DecodeFarPrefetch CpuDecodeFarPrefetch() {
  return ChooseDecodeFarPrefetch(ProbedCpuTraits());
}

std::string_view DecodeFarPrefetchName(DecodeFarPrefetch p) {
  switch (p) {
    case DecodeFarPrefetch::kL2Fixed:
      return "l2-16k";
    case DecodeFarPrefetch::kNonTemporalNextTile:
      return "nta-next-tile";
    case DecodeFarPrefetch::kL2NextTile:
      return "l2-next-tile";
  }
  return "l2-16k";
}

std::string_view DecodePrefetchName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512:
    case CpuIsa::kAvx512Amx:
      return DecodeFarPrefetchName(CpuDecodeFarPrefetch());
    case CpuIsa::kAvx2:
    case CpuIsa::kAvx2Vnni:
      return "near-only";
    case CpuIsa::kScalar:
      break;
  }
  return "none";
}

std::vector<std::string_view> MissingCpuFeatures(CpuIsa isa) {
  std::vector<std::string_view> needed;
  switch (isa) {
    case CpuIsa::kScalar:
      return {};
    case CpuIsa::kAvx2:
      needed = {"avx2", "fma", "f16c"};
      break;
    case CpuIsa::kAvx2Vnni:
      needed = {"avx2", "fma", "f16c", "avx-vnni"};
      break;
    case CpuIsa::kAvx512:
      needed = {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512vnni"};
      break;
    case CpuIsa::kAvx512Amx:
      needed = {"avx2",     "fma",      "f16c",       "avx512f",          "avx512bw",
                "avx512vl", "avx512dq", "avx512vnni", "amx-tile+amx-int8"};
      break;
  }
  std::vector<std::string_view> missing;
  for (std::string_view name : needed) {
    bool present = false;  // a feature never probed (AMX without AVX-512) counts as absent
    for (const CpuFeature& f : CpuFeatures()) present = present || (f.name == name && f.present);
    if (!present) missing.push_back(name);
  }
  return missing;
}

std::string CpuIsaUnavailableMessage(CpuIsa isa) {
  std::string lacks;
  for (std::string_view name : MissingCpuFeatures(isa)) {
    lacks += (lacks.empty() ? "" : " ") + std::string(name);
  }
#if !defined(__x86_64__)
  if (isa != CpuIsa::kScalar) lacks = "x86-64";
#endif
  return "--cpu-isa " + std::string(CpuIsaName(isa)) + ": this CPU lacks " +
         (lacks.empty() ? std::string("it") : lacks) + "; this CPU runs " + SupportedCpuIsaNames();
}

std::string SupportedCpuIsaNames() {
  std::string names;
  for (CpuIsa isa :
       {CpuIsa::kAvx512Amx, CpuIsa::kAvx512, CpuIsa::kAvx2Vnni, CpuIsa::kAvx2, CpuIsa::kScalar}) {
    if (!CpuSupports(isa)) continue;
    if (!names.empty()) names += ", ";
    names += CpuIsaName(isa);
  }
  return names;
}

}  // namespace tessera
