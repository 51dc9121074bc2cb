// ArtifactManifest: the versioned JSON file (<dir>/manifest.json) that lists a directory's NPU
// programs - for each its target generation, xclbin + kernel name, instruction sequence, the
// kernel's argument ABI, shapes, dtype, numeric contract and the sha256 of both files.
// LoadArtifactManifest trusts nothing: unknown fields and versions are refused by name, every
// path must stay inside the directory, every hash is verified, and each program's xclbin and
// insts are parsed and cross-checked against each other and the detected device.
//
//   {"format": "tessera-npu-artifacts", "version": 1, "programs": [{"name": "gemv_bf16_k2048",
//    "target": "xdna1", "kernel": "MLIR_AIE", "xclbin": "gemv.xclbin", "xclbin_sha256": "…",
//    "insts": "gemv.insts.bin", "insts_sha256": "…", "arguments": ["opcode", "instr", "ninstr",
//    "bo0", "bo1", "bo2", "bo3", "bo4"], "shapes": {"M": 2048, "K": 2048}, "dtype": "bf16",
//    "numeric_contract": "bf16 in, fp32 accumulate, RNE to bf16, |err| <= 2 ulp"}]}
//
//   TS_ASSIGN_OR_RETURN(ArtifactManifest m, LoadArtifactManifest(dir, target));
//   const NpuProgramArtifact* p = m.Find("gemv_bf16_k2048");   // p->xclbin_path, p->insts_info
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "backend/xdna/npu_target.h"
#include "backend/xdna/txn.h"
#include "backend/xdna/xclbin.h"
#include "base/status.h"

namespace tessera {

inline constexpr std::string_view kArtifactManifestFormat = "tessera-npu-artifacts";
inline constexpr int kArtifactManifestVersion = 1;
inline constexpr std::string_view kArtifactManifestFile = "manifest.json";

// Bounds on what LoadArtifactManifest accepts.
inline constexpr uint64_t kManifestMaxBytes = 1u << 20;
inline constexpr size_t kManifestMaxPrograms = 256;
inline constexpr uint64_t kArtifactMaxFileBytes = 256u << 20;

struct NpuProgramArtifact {
  // As the manifest states them.
  std::string name;
  XdnaGeneration target = XdnaGeneration::kXdna1;
  std::string kernel;  // kernel name inside the xclbin ("MLIR_AIE")
  std::string xclbin;  // path relative to the manifest's directory
  std::string xclbin_sha256;
  std::string insts;
  std::string insts_sha256;
  std::vector<std::string> arguments;                  // the kernel's argument names, in order
  std::map<std::string, std::vector<int64_t>> shapes;  // "K": {2048}; a number is one dim
  std::string dtype;                                   // "bf16", "int8", ...
  std::string numeric_contract;

  // Filled by LoadArtifactManifest.
  std::string xclbin_path;  // canonical absolute paths, inside the directory
  std::string insts_path;
  XclbinInfo xclbin_info;
  TxnInfo insts_info;
};

struct ArtifactManifest {
  int version = kArtifactManifestVersion;
  std::string dir;  // canonical
  std::vector<NpuProgramArtifact> programs;

  const NpuProgramArtifact* Find(std::string_view name) const;
};

// Reads and verifies <dir>/manifest.json against the device `target` (see the file comment).
Expected<ArtifactManifest> LoadArtifactManifest(const std::string& dir, const NpuTarget& target);

// The manifest JSON of `programs` (their stated fields; the Load-filled ones are ignored).
std::string ArtifactManifestJson(const std::vector<NpuProgramArtifact>& programs);

// Writes a program's two files into `dir` under program.xclbin / program.insts and sets its
// sha256 fields; then WriteArtifactManifest writes <dir>/manifest.json. For tests and tools.
Status WriteProgramFiles(const std::string& dir, NpuProgramArtifact& program,
                         const std::vector<uint8_t>& xclbin_bytes,
                         const std::vector<uint8_t>& insts_bytes);
Status WriteArtifactManifest(const std::string& dir,
                             const std::vector<NpuProgramArtifact>& programs);

}  // namespace tessera
