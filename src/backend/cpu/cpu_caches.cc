#include "backend/cpu/cpu_caches.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>

#include "backend/cpu/cpu_features.h"
#include "base/progress.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace tessera {
namespace {

// Data and unified caches count; instruction caches do not.
enum class CacheType { kData, kInstruction, kUnified };

// Records a cache of `level` once (the first one seen keeps its size).
void Record(CpuCaches* c, int level, CacheType type, int64_t bytes) {
  if (type == CacheType::kInstruction || bytes <= 0) return;
  int64_t* slot = level == 1   ? &c->l1d_bytes
                  : level == 2 ? &c->l2_bytes
                  : level == 3 ? &c->l3_bytes
                               : nullptr;
  if (slot != nullptr && *slot == 0) *slot = bytes;
}

// The first line of a small file, trimmed; nullopt when it cannot be read.
std::optional<std::string> ReadSmallFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string text(64, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

#if defined(__x86_64__)
// Subleaves of a CPUID cache leaf until the first of type 0 (at most 16).
std::vector<std::array<uint32_t, 3>> CpuidCacheSubleaves(unsigned leaf) {
  std::vector<std::array<uint32_t, 3>> out;
  for (unsigned sub = 0; sub < 16; ++sub) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(leaf, sub, &a, &b, &c, &d) || (a & 0x1fu) == 0) break;
    out.push_back({a, b, c});
  }
  return out;
}

CpuCaches ProbeCpuidCaches() {
  if (!ProbedCpuTraits().amd) return CachesFromCpuidLeaves(CpuidCacheSubleaves(4));
  // AMD's leaf 0x8000001D exists with TopologyExtensions (leaf 0x80000001 ECX bit 22).
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0x80000001u, &a, &b, &c, &d) || (c & (1u << 22)) == 0) return {};
  return CachesFromCpuidLeaves(CpuidCacheSubleaves(0x8000001Du));
}
#else
CpuCaches ProbeCpuidCaches() {
  return {};
}
#endif

}  // namespace

std::optional<int64_t> ParseSysfsCacheSize(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  int shift = 0;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      default:
        break;
    }
    if (shift != 0) text.remove_suffix(1);
  }
  if (text.empty() || text.size() > 12) return std::nullopt;
  int64_t value = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return std::nullopt;
    value = value * 10 + (ch - '0');
  }
  if (value == 0 || value > (std::numeric_limits<int64_t>::max() >> shift)) return std::nullopt;
  return value << shift;
}

CpuCaches ReadSysfsCaches(const std::string& cache_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> indexes;
  for (fs::directory_iterator it(cache_dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind("index", 0) == 0) indexes.push_back(it->path());
  }
  std::sort(indexes.begin(), indexes.end());  // index0 (L1d) first, as the kernel lists them
  CpuCaches c;
  for (const fs::path& dir : indexes) {
    const auto level = ReadSmallFile(dir / "level");
    const auto type = ReadSmallFile(dir / "type");
    const auto size = ReadSmallFile(dir / "size");
    if (!level || !type || !size) continue;
    if (level->size() != 1 || (*level)[0] < '1' || (*level)[0] > '3') continue;
    CacheType kind;
    if (*type == "Data") {
      kind = CacheType::kData;
    } else if (*type == "Unified") {
      kind = CacheType::kUnified;
    } else {
      continue;  // "Instruction", or anything unknown
    }
    if (auto bytes = ParseSysfsCacheSize(*size)) Record(&c, (*level)[0] - '0', kind, *bytes);
  }
  return c;
}

CpuCaches CachesFromCpuidLeaves(const std::vector<std::array<uint32_t, 3>>& subleaves) {
  CpuCaches c;
  for (const auto& [eax, ebx, ecx] : subleaves) {
    const uint32_t type = eax & 0x1fu;  // 1 data, 2 instruction, 3 unified
    if (type == 0) break;
    if (type > 3) continue;
    const int level = static_cast<int>((eax >> 5) & 0x7u);
    const int64_t ways = (ebx >> 22) + 1, partitions = ((ebx >> 12) & 0x3ffu) + 1,
                  line = (ebx & 0xfffu) + 1, sets = int64_t{ecx} + 1;
    Record(&c, level,
           type == 1   ? CacheType::kData
           : type == 2 ? CacheType::kInstruction
                       : CacheType::kUnified,
           ways * partitions * line * sets);
  }
  return c;
}

CpuCaches FillUnknownCaches(CpuCaches known, const CpuCaches& fallback) {
  if (known.l1d_bytes == 0) known.l1d_bytes = fallback.l1d_bytes;
  if (known.l2_bytes == 0) known.l2_bytes = fallback.l2_bytes;
  if (known.l3_bytes == 0) known.l3_bytes = fallback.l3_bytes;
  return known;
}

CpuCaches CpuCacheSizes() {
  static const CpuCaches caches = [] {
    const CpuCaches sysfs = ReadSysfsCaches("/sys/devices/system/cpu/cpu0/cache");
    if (sysfs.l1d_bytes > 0 && sysfs.l2_bytes > 0 && sysfs.l3_bytes > 0) return sysfs;
    return FillUnknownCaches(sysfs, ProbeCpuidCaches());
  }();
  return caches;
}

std::string CpuCachesText(const CpuCaches& c) {
  auto size = [](int64_t bytes) {
    return bytes > 0 ? FormatBytes(static_cast<double>(bytes)) : std::string("unknown");
  };
  return "L1d " + size(c.l1d_bytes) + ", L2 " + size(c.l2_bytes) + ", L3 " + size(c.l3_bytes);
}

}  // namespace tessera
