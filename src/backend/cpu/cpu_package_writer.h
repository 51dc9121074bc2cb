// The tensor file of a runtime package for the cpu backend: one safetensors file whose data
// section holds every tensor at a 64-byte aligned offset, the matrices already packed (and
// quantized) in this backend's panel layout (cpu_weights.h, kCpuPanelLayout) and the source's
// other tensors (norms, biases, an untied model's embedding) byte for byte. A model whose
// embedding is tied to its LM head stores that matrix once, as the packed head: the backend
// reads token rows from it (Backend::EmbedFromHead), so no plain embedding is kept beside it.
// The package around the file (manifest, hashes, staging, verification) is the catalog's
// (catalog/package.h).
//
//   TS_ASSIGN_OR_RETURN(CpuPackageFile f,
//                       WriteCpuPackageTensorFile(*ckpt, WeightFormat::kInt8, dir +
//                       "/model.safetensors",
//                                                 {{"tessera_package", "3"}}));
//   f.bytes; f.sha256;  // of the file as written
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_weights.h"
#include "format/dtype.h"
#include "model/checkpoint.h"

namespace tessera {

inline constexpr uint64_t kCpuPackageAlignment = kPackedTensorAlignment;

// One tensor of the file: a source tensor copied byte for byte, or one buffer (panels, row
// scales, row offsets or block scales) of a packed matrix.
struct CpuPackageTensor {
  std::string name;
  DType dtype = DType::kU8;
  uint64_t bytes = 0;
  uint64_t offset = 0;               // inside the data section, kCpuPackageAlignment aligned
  const TensorInfo* copy = nullptr;  // set for a copied source tensor
  int64_t layer = 0;                 // packed buffers: the layer, -1 for the LM head
  CpuMatrix matrix = CpuMatrix::kQkv;
  int part = 0;  // index into kPackedParts
};

// The tensors the file holds for `source` packed as `format`, in file order, with offsets.
std::vector<CpuPackageTensor> PlanCpuPackageTensors(const Checkpoint& source, WeightFormat format);

using CpuPackageFile = PackedTensorFile;  // backend.h

// Packs `source` (a checkpoint, not a package) layer by layer, one layer in memory at a time,
// with the same code the cpu backend uses at load, and writes the file at `path` while hashing
// it. `metadata` entries are added to the header's __metadata__ beside the layout and format.
// `progress` gets the bytes written after each tensor (phase kPackingPhase).
inline constexpr char kPackingPhase[] = "packing tensors";
Expected<CpuPackageFile> WriteCpuPackageTensorFile(
    const Checkpoint& source, WeightFormat format, const std::string& path,
    const std::vector<std::pair<std::string, std::string>>& metadata,
    const ProgressCallback& progress = {});

}  // namespace tessera
