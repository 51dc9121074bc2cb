// The one place that asks the CPU what it can do. Everything else receives a CpuIsa (or the
// kernel table chosen from it) and never probes the hardware itself.
//
//   CpuIsa isa = DetectCpuIsa();          // the best family the machine has
//   const KernelTable* k = KernelsFor(isa);
//   bool ok = CpuSupports(CpuIsa::kAvx2);  // tests use this to skip absent paths
//   CpuIsaReason(isa)                     // why: "the CPU has AVX-512 F, BW, ..."
//   DecodeFarPrefetch far = ChooseDecodeFarPrefetch(ProbedCpuTraits());  // a pure choice
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"

namespace tessera {

// Kernel families (CpuIsa, backend.h), in order of preference. kAvx512 means F+BW+VL+DQ+VNNI
// and FMA (the whole set kernels_avx512.cc is compiled for: Intel Cascade Lake, Ice Lake,
// Tiger Lake, Rocket Lake, Sapphire Rapids and later; AMD Zen 4 and later); kAvx2 means
// AVX2+FMA+F16C; kAvx2Vnni is kAvx2 plus AVX-VNNI (the 256-bit vpdpbusd of Intel's Alder Lake
// and later client CPUs, which lack AVX-512). Not a strict ladder: many AVX-512 CPUs have no
// AVX-VNNI. AVX512_BF16 is not part of kAvx512: only the optional vdpbf16ps matmul
// (KernelTable::matmul_bf16_dot, kernels_avx512bf16.cc, for --bf16-activations) needs it, and
// it is null on AVX-512 CPUs without it (Ice Lake, Tiger Lake, Rocket Lake).
// kAvx512Amx is kAvx512 plus AMX-TILE and AMX-INT8 (Intel Sapphire Rapids and later) with the
// tile state enabled by the OS and granted to this process (Linux's ARCH_REQ_XCOMP_PERM, asked
// once by the probe); its INT8 tiles (kernels_amx.cc) use no BF16 either.

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
// The CPU features `isa` needs that this machine lacks, by their CpuFeatures() names
// ("avx-vnni", "amx-tile+amx-int8"), for refusing --cpu-isa; empty when it runs `isa`.
std::vector<std::string_view> MissingCpuFeatures(CpuIsa isa);
// The refusal of a --cpu-isa this CPU lacks: "--cpu-isa avx2vnni: this CPU lacks avx-vnni;
// this CPU runs avx512, avx2, scalar".
std::string CpuIsaUnavailableMessage(CpuIsa isa);

// The probed facts the kernel choices below are made from. The choices are pure functions of
// them, so each is tested on every CPU's facts, not only on this host's.
struct CpuTraits {
  // CPUID vendor "AuthenticAMD". AMD documents that lines brought in by PREFETCHNTA are not
  // installed in L2 or L3 when they leave L1.
  bool amd = false;
  bool avx512 = false;       // the kAvx512 family's whole set (CpuSupports(CpuIsa::kAvx512))
  bool avx_vnni = false;     // AVX-VNNI (CPUID leaf 7 subleaf 1 EAX bit 4)
  bool avx512_bf16 = false;  // AVX512_BF16 (vdpbf16ps): KernelTable::matmul_bf16_dot
};
// This machine's (probed once, cached; all false off x86-64).
const CpuTraits& ProbedCpuTraits();

// How the AVX-512 INT8 kernel prefetches the weights of decode tiles far ahead of their loads
// (kernels_avx512.cc has the measurements behind each; the BF16 and INT4 kernels add the
// next-tile prefetch under kL2NextTile only, and otherwise keep their near prefetch alone):
//   kL2Fixed: into L2, 16 KiB ahead, in tiles of more than 4 rows with panels under 16 KiB
//     (measured on Intel Xeons; every CPU that is not AMD's);
//   kNonTemporalNextTile: PREFETCHNTA of the next tile, in tiles of more than 4 rows
//     (measured on Zen 5);
//   kL2NextTile: into L2, the next tile, in every decode tile (measured on Zen 4, the first
//     AMD core with AVX-512).
enum class DecodeFarPrefetch { kL2Fixed = 0, kNonTemporalNextTile = 1, kL2NextTile = 2 };
// The far prefetch for a CPU with `traits`, from features rather than CPUID family numbers
// (Zen 3 shares Zen 4's family 19h):
//   AMD with AVX-512 and AVX-VNNI (Zen 5: AVX-VNNI is new in it) -> kNonTemporalNextTile;
//   AMD with AVX-512 but no AVX-VNNI (Zen 4)                      -> kL2NextTile;
//   everything else                                              -> kL2Fixed.
// AMD without AVX-512 (Zen 2, Zen 3) gets kL2Fixed, which no kernel it runs reads: only the
// AVX-512 tables use a far prefetch.
DecodeFarPrefetch ChooseDecodeFarPrefetch(const CpuTraits& traits);
// ChooseDecodeFarPrefetch(ProbedCpuTraits()): what the AVX-512 table holds.
DecodeFarPrefetch CpuDecodeFarPrefetch();
std::string_view DecodeFarPrefetchName(DecodeFarPrefetch p);  // "l2-16k", "nta-next-tile", ...
// The decode-tile weight prefetch of `isa`'s kernels on this CPU, for reports and the load
// log: the AVX-512 families' DecodeFarPrefetchName(CpuDecodeFarPrefetch()); "near-only" for
// avx2 and avx2vnni (each panel prefetched into L1 a few KiB ahead of its loads, no far
// prefetch); "none" for scalar.
std::string_view DecodePrefetchName(CpuIsa isa);

}  // namespace tessera
