// The one place that asks the CPU what it can do. Everything else receives a CpuIsa (or the
// kernel table chosen from it) and never probes the hardware itself.
//
//   CpuIsa isa = DetectCpuIsa();          // the best family the machine has
//   const KernelTable* k = KernelsFor(isa);
//   bool ok = CpuSupports(CpuIsa::kAvx2);  // tests use this to skip absent paths
//   CpuIsaReason(isa)                     // why: "the CPU has AVX-512 F, BW, ..."
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"

namespace tessera {

// Kernel families (CpuIsa, backend.h), in order of preference. kAvx512 means F+BW+VL+DQ+BF16+VNNI
// and FMA (the whole set kernels_avx512.cc is compiled for); kAvx2 means AVX2+FMA+F16C;
// kAvx2Vnni is kAvx2 plus AVX-VNNI (the 256-bit vpdpbusd of Intel's Alder Lake and later client
// CPUs, which lack AVX-512). Not a strict ladder: many AVX-512 CPUs have no AVX-VNNI.
// kAvx512Amx is kAvx512 plus AMX-TILE and AMX-INT8 (Intel Sapphire Rapids and later) with the
// tile state enabled by the OS and granted to this process (Linux's ARCH_REQ_XCOMP_PERM, asked
// once by the probe).

// The best family this machine runs (probed once, cached).
CpuIsa DetectCpuIsa();

// One CPUID feature the families are built from, as probed (for `tessera doctor`).
struct CpuFeature {
  std::string_view name;  // "avx2", "avx512bf16", ...
  bool present = false;
};
// In probe order; empty off x86-64.
const std::vector<CpuFeature>& CpuFeatures();
// Why DetectCpuIsa() chose `isa`, in words ("the CPU has AVX2, FMA and F16C but ...").
std::string CpuIsaReason(CpuIsa isa);
bool CpuSupports(CpuIsa isa);

// The families this machine runs, best first, for messages ("avx512, avx2, scalar").
std::string SupportedCpuIsaNames();

// Whether the CPU is AMD's (CPUID vendor "AuthenticAMD"; probed once, cached). AMD documents
// that lines brought in by PREFETCHNTA are not installed in L2 or L3 when they leave L1.
bool CpuIsAmd();

// How the AVX-512 INT8 kernel prefetches the weights of decode tiles far ahead of their loads
// (kernels_avx512.cc has the measurements behind each; the BF16 and INT4 kernels add the
// next-tile prefetch under kL2NextTile only, and otherwise keep their near prefetch alone):
//   kL2Fixed: into L2, 16 KiB ahead, in tiles of more than 4 rows with panels under 16 KiB
//     (measured on Intel Xeons; every CPU that is not AMD's);
//   kNonTemporalNextTile: PREFETCHNTA of the next tile, in tiles of more than 4 rows (Zen 5,
//     CPUID family 1Ah, and later AMD families);
//   kL2NextTile: into L2, the next tile, in every decode tile (Zen 4, family 19h, the first
//     AMD family with AVX-512).
enum class DecodeFarPrefetch { kL2Fixed = 0, kNonTemporalNextTile = 1, kL2NextTile = 2 };
// This CPU's (probed once, cached), from the vendor and CPUID family.
DecodeFarPrefetch CpuDecodeFarPrefetch();
std::string_view DecodeFarPrefetchName(DecodeFarPrefetch p);  // "l2-16k", "nta-next-tile", ...

}  // namespace tessera
