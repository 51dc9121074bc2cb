// tessera-npu-hardware-check: runs every program of an NPU artifact directory once on the real
// device, through tessera's own device layer (MakeXdnaDevice -> the XRT adapter), and prints
// one JSON object per program:
//   {"program", "ran", "state", "outputs_written", "matches_reference", "detail"}
// Every data buffer starts filled with a sentinel byte; "outputs_written" is true only when the
// device changed at least one byte of one of them, because ERT_CMD_STATE_COMPLETED alone does
// not prove that anything executed (FACTS.md 2.2). "matches_reference" is null: manifest v1
// carries no reference vectors, so the sentinel check is the only evidence this tool gives.
//
// NEVER RUN: this project has no machine with an NPU. It is compiled in every build (so it keeps
// compiling) but does its work only in builds with the XRT adapter (TESSERA_HAVE_XRT_ADAPTER)
// and never sees the fake device (which it does not link). scripts/npu-hardware-check drives it.
//
//   tessera-npu-hardware-check --has-xrt-adapter        # prints true or false
//   tessera-npu-hardware-check [--buffer-bytes N] [--timeout-ms N] <artifact-dir>
//
// Exit code: 0 when every program ran and wrote output, 1 when one did not, 2 when nothing
// could be checked (no device, no adapter, bad manifest, bad usage).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/xdna/artifact_manifest.h"
#include "backend/xdna/device.h"
#include "base/mapped_file.h"

namespace tessera {
namespace {

constexpr uint8_t kSentinel = 0xA5;
constexpr size_t kFirstDataArg = 3;  // mlir-aie kernels: opcode, instr, ninstr, then buffers
constexpr uint64_t kMinBufferBytes = 64 * 1024;
constexpr uint64_t kMaxBufferBytes = 64u << 20;

#ifdef TESSERA_HAVE_XRT_ADAPTER
constexpr bool kHaveXrtAdapter = true;
#else
constexpr bool kHaveXrtAdapter = false;
#endif

int Fail(const std::string& message) {
  std::printf("%s\n", nlohmann::json{{"error", message}}.dump().c_str());
  return 2;
}

// Without sizes per argument in the manifest, every buffer gets 4 bytes per element of the
// largest product of the program's shapes (the weights of a GEMV), within [64 KiB, 64 MiB].
uint64_t BufferBytesFor(const NpuProgramArtifact& program) {
  uint64_t elements = 1;
  for (const auto& [name, dims] : program.shapes) {
    for (int64_t d : dims) {
      if (d <= 0) continue;
      const uint64_t dim = std::min<uint64_t>(static_cast<uint64_t>(d), kMaxBufferBytes);
      elements = std::min<uint64_t>(elements * dim, kMaxBufferBytes);  // both <= 2^26
    }
  }
  return std::clamp<uint64_t>(elements * 4, kMinBufferBytes, kMaxBufferBytes);
}

nlohmann::json CheckProgram(XdnaDevice& device, const NpuProgramArtifact& artifact,
                            uint64_t buffer_bytes, std::chrono::milliseconds timeout) {
  nlohmann::json report = {{"program", artifact.name},
                           {"ran", false},
                           {"state", nullptr},
                           {"outputs_written", false},
                           {"matches_reference", nullptr}};
  auto fail = [&](const std::string& detail) {
    report["detail"] = detail;
    return report;
  };
  const std::vector<std::string>& args = artifact.arguments;
  if (args.size() <= kFirstDataArg || args[0] != "opcode" || args[1] != "instr" ||
      args[2] != "ninstr") {
    return fail("arguments do not start with mlir-aie's opcode, instr, ninstr");
  }
  auto xclbin = ReadFileToString(artifact.xclbin_path);
  if (!xclbin) return fail(xclbin.status().message());
  auto insts = ReadFileToString(artifact.insts_path);
  if (!insts) return fail(insts.status().message());
  if (insts->empty() || insts->size() % 4 != 0) return fail("insts: not whole 32-bit words");
  NpuProgram program{artifact.name, std::vector<uint8_t>(xclbin->begin(), xclbin->end()), {}};
  NpuKernel kernel{artifact.kernel, std::vector<uint32_t>(insts->size() / 4)};
  std::memcpy(kernel.instructions.data(), insts->data(), insts->size());
  program.kernels.push_back(std::move(kernel));

  auto opened = device.OpenProgram(program);
  if (!opened) return fail(opened.status().message());
  std::vector<BufferId> buffers;
  auto release = [&] {
    for (BufferId b : buffers) (void)device.FreeBuffer(b);
    (void)device.CloseProgram(*opened);
  };
  Run run{*opened, 0, {}};
  for (size_t i = kFirstDataArg; i < args.size(); ++i) {
    auto b = device.AllocateBuffer(buffer_bytes, BufferKind::kData, *opened, 0,
                                   static_cast<int>(i - kFirstDataArg));
    if (!b) {
      release();
      return fail(args[i] + ": " + b.status().message());
    }
    buffers.push_back(*b);
    std::span<uint8_t> host = device.Map(*b);
    if (host.size() != buffer_bytes) {
      release();
      return fail(args[i] + ": the device could not map the buffer");
    }
    std::memset(host.data(), kSentinel, host.size());
    if (Status s = device.Sync(*b, SyncDirection::kToDevice); !s.ok()) {
      release();
      return fail(args[i] + ": " + s.message());
    }
    run.args.push_back(RunArg::Buffer(*b));
  }
  auto result = device.RunChain(std::span<const Run>(&run, 1), timeout);
  if (!result) {
    release();
    return fail(result.status().message());
  }
  report["ran"] = true;
  report["state"] = std::string(RunStateName(result->state));
  if (!result->detail.empty()) report["detail"] = result->detail;
  nlohmann::json written = nlohmann::json::array();
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (Status s = device.Sync(buffers[i], SyncDirection::kFromDevice); !s.ok()) {
      report["detail"] = args[kFirstDataArg + i] + ": " + s.message();
      continue;
    }
    std::span<const uint8_t> host = device.Map(buffers[i]);
    if (std::any_of(host.begin(), host.end(), [](uint8_t v) { return v != kSentinel; })) {
      written.push_back(args[kFirstDataArg + i]);
    }
  }
  report["outputs_written"] = !written.empty();
  report["buffers_written"] = written;
  report["buffer_bytes"] = buffer_bytes;
  release();
  return report;
}

int Main(int argc, char** argv) {
  uint64_t buffer_bytes = 0;
  int64_t timeout_ms = 2000;
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--has-xrt-adapter") {
      std::printf("%s\n", kHaveXrtAdapter ? "true" : "false");
      return 0;
    }
    if ((arg == "--buffer-bytes" || arg == "--timeout-ms") && i + 1 < argc) {
      char* end = nullptr;
      const long long v = std::strtoll(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || v <= 0) {
        return Fail(std::string(arg) + " wants a positive integer, got '" + argv[i] + "'");
      }
      if (arg == "--buffer-bytes") {
        buffer_bytes = std::min<uint64_t>(static_cast<uint64_t>(v), uint64_t{1} << 30);
      } else {
        timeout_ms = v;
      }
    } else if (!arg.empty() && arg[0] != '-' && dir.empty()) {
      dir = arg;
    } else {
      return Fail(
          "usage: tessera-npu-hardware-check [--buffer-bytes N] [--timeout-ms N] "
          "<artifact-dir> | --has-xrt-adapter");
    }
  }
  if (dir.empty()) return Fail("give the artifact directory (it holds manifest.json)");
  if (!kHaveXrtAdapter) {
    return Fail(
        "this build has no XRT adapter (it needs XRT >= 2.17 at build time); rebuild "
        "tessera on the NPU machine");
  }
  auto device = MakeXdnaDevice();  // the XRT device
  if (!device) return Fail(device.status().message());
  const NpuTarget& target = NpuTargetFor((*device)->description().generation);
  auto manifest = LoadArtifactManifest(dir, target);
  if (!manifest) return Fail(manifest.status().message());
  bool all_written = true;
  for (const NpuProgramArtifact& p : manifest->programs) {
    nlohmann::json report =
        CheckProgram(**device, p, buffer_bytes ? buffer_bytes : BufferBytesFor(p),
                     std::chrono::milliseconds(timeout_ms));
    report["device"] = (*device)->description().name;
    all_written = all_written && report["outputs_written"].get<bool>();
    std::printf("%s\n", report.dump().c_str());
    std::fflush(stdout);
  }
  return all_written ? 0 : 1;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  try {
    return tessera::Main(argc, argv);
  } catch (const std::exception& e) {  // nlohmann::json or std::bad_alloc: report, never abort
    return tessera::Fail(std::string("internal error: ") + e.what());
  }
}
