#include "backend/cpu/cpu_report.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/kernels.h"

namespace tessera {
namespace {

// "MemTotal:       16303780 kB" -> bytes; unset when the line is absent or malformed.
std::optional<uint64_t> MeminfoBytes(const std::string& text, std::string_view key) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + at, end - at);
    at = end + 1;
    if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ':') {
      continue;
    }
    unsigned long long kib = 0;
    char unit[8] = {};
    const std::string rest(line.substr(key.size() + 1));
    if (std::sscanf(rest.c_str(), "%llu %7s", &kib, unit) != 2 || std::string_view(unit) != "kB") {
      return std::nullopt;
    }
    if (kib > (UINT64_MAX >> 10)) return std::nullopt;
    return static_cast<uint64_t>(kib) << 10;
  }
  return std::nullopt;
}

std::string Gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

std::string Join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

}  // namespace

CpuBackendReport DescribeCpuBackend(const std::string& root) {
  CpuBackendReport r;
  r.isa = DetectCpuIsa();
  r.reason = CpuIsaReason(r.isa);
  for (const CpuFeature& f : CpuFeatures()) {
    (f.present ? r.present : r.missing).emplace_back(f.name);
  }
  r.supported = SupportedCpuIsaNames();
  if (const KernelTable* k = KernelsFor(r.isa)) {
    const std::pair<bool, const char*> kernels[] = {
        {k->matmul_f32 != nullptr, "matmul f32"},
        {k->matmul_bf16 != nullptr, "matmul bf16"},
        {k->matmul_bf16_dot != nullptr, "matmul bf16 dot (--bf16-activations)"},
        {k->matmul_int8 != nullptr, "matmul int8"},
        {k->matmul_int4 != nullptr, "matmul int4"},
        {k->attention != nullptr, "attention"},
        {k->attention_blocked != nullptr, "attention blocked"},
        {k->attention_decode_split != nullptr, "attention decode split"}};
    for (const auto& [has, name] : kernels) {
      if (has) r.kernels.emplace_back(name);
    }
  }
  r.decode_prefetch = std::string(DecodePrefetchName(r.isa));
  r.caches = CpuCacheSizes();
  // As CpuBackend sizes its pool when BackendOptions::threads is 0.
  r.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::ifstream in(std::string(root.empty() ? "/" : root) + "/proc/meminfo");
  if (in) {
    std::string text(64 * 1024, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    r.memory_total_bytes = MeminfoBytes(text, "MemTotal");
    r.memory_available_bytes = MeminfoBytes(text, "MemAvailable");
  }
  return r;
}

std::string CpuBackendReportText(const CpuBackendReport& r) {
  std::string out = "CPU backend: ready\n";
  out += "  isa       " + std::string(CpuIsaName(r.isa)) + ": " + r.reason + "\n";
  out += "  runs      " + r.supported + " (--cpu-isa picks another of these)\n";
  out += "  features  " + (r.present.empty() ? std::string("none probed") : Join(r.present, " "));
  if (!r.missing.empty()) out += "; absent: " + Join(r.missing, " ");
  out += "\n  kernels   " + Join(r.kernels, ", ") + "; decode prefetch " + r.decode_prefetch;
  out += "\n  caches    " + CpuCachesText(r.caches) + " (L1d and L2 per core)";
  out += "\n  threads   " + std::to_string(r.threads) + " (every hardware thread)\n";
  out += "  memory    " +
         (r.memory_total_bytes ? Gib(*r.memory_total_bytes) + " total" : std::string("unknown")) +
         (r.memory_available_bytes ? ", " + Gib(*r.memory_available_bytes) + " available" : "") +
         "\n";
  return out;
}

std::string CpuBackendReportJson(const CpuBackendReport& r) {
  using nlohmann::ordered_json;
  auto optional_bytes = [](const std::optional<uint64_t>& v) {
    return v ? ordered_json(*v) : ordered_json(nullptr);
  };
  auto cache_bytes = [](int64_t v) { return v > 0 ? ordered_json(v) : ordered_json(nullptr); };
  ordered_json out = {{"ready", r.ready()},
                      {"isa", std::string(CpuIsaName(r.isa))},
                      {"reason", r.reason},
                      {"supported", r.supported},
                      {"features", r.present},
                      {"absent_features", r.missing},
                      {"kernels", r.kernels},
                      {"decode_prefetch", r.decode_prefetch},
                      {"caches",
                       {{"l1d_bytes", cache_bytes(r.caches.l1d_bytes)},
                        {"l2_bytes", cache_bytes(r.caches.l2_bytes)},
                        {"l3_bytes", cache_bytes(r.caches.l3_bytes)}}},
                      {"threads", r.threads},
                      {"memory_total_bytes", optional_bytes(r.memory_total_bytes)},
                      {"memory_available_bytes", optional_bytes(r.memory_available_bytes)}};
  return out.dump(2);
}

std::string CpuKernelChoiceText(CpuIsa isa) {
  return std::string(CpuIsaName(isa)) + " kernels, decode prefetch " +
         std::string(DecodePrefetchName(isa));
}

}  // namespace tessera
