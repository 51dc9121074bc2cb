// The data cache sizes of this machine's cores, for sizing kernel tiles. Probed once: Linux's
// sysfs first (/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}; virtual machines
// fill it too), then CPUID's cache leaves (leaf 4 on Intel, 0x8000001D on AMD) for any level
// sysfs left unknown. 0 means unknown: callers keep a fixed size then, and say so.
//
//   const CpuCaches c = CpuCacheSizes();
//   // e.g. rows of a prompt tile whose panels should stay in L2 (half of it, for the rest):
//   int64_t rows = c.l2_bytes > 0 ? std::clamp<int64_t>(c.l2_bytes / 2 / panel_bytes, 1, 8) : 4;
//   std::string shown = CpuCachesText(c);  // "L1d 48.0 KiB, L2 2.0 MiB, L3 260.0 MiB"
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

struct CpuCaches {
  int64_t l1d_bytes = 0;  // one core's L1 data cache
  int64_t l2_bytes = 0;   // one core's L2 (data or unified)
  int64_t l3_bytes = 0;   // the whole L3 cpu0 shares with other cores (not a per-core share; on
                          // CPUs with several L3s, e.g. AMD's CCDs, the one cpu0 sits in)
};

// This machine's (probed once, cached).
CpuCaches CpuCacheSizes();

// "L1d 48.0 KiB, L2 2.0 MiB, L3 260.0 MiB"; "unknown" for a size that is 0.
std::string CpuCachesText(const CpuCaches& c);

// ---- the pieces, pure, for tests ----

// A sysfs cache "size" file ("48K\n"; K, M or G, or plain bytes) in bytes; nullopt for
// anything else (empty, junk, zero, overflow).
std::optional<int64_t> ParseSysfsCacheSize(std::string_view text);
// The caches described under `cache_dir` (a cpuN/cache directory: index*/level, type, size).
// A missing or malformed file leaves that cache unknown; a missing directory gives all 0.
CpuCaches ReadSysfsCaches(const std::string& cache_dir);
// The caches described by CPUID cache-leaf subleaves, as {EAX, EBX, ECX} in subleaf order
// (leaf 4 and 0x8000001D share the layout); the list ends at the first of type 0.
CpuCaches CachesFromCpuidLeaves(const std::vector<std::array<uint32_t, 3>>& subleaves);
// `known` with each unknown size taken from `fallback`.
CpuCaches FillUnknownCaches(CpuCaches known, const CpuCaches& fallback);

}  // namespace tessera
