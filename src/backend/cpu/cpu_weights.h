// The CPU backend's weights for one decoder layer and for the LM head, either packed at load
// from a checkpoint's tensors or viewed in place from a package that already holds the packed
// panels (written by `tessera convert`, see catalog/package.h). Both paths go through this
// file, so a package's panels are exactly the ones packing at load would produce.
//
//   TS_ASSIGN_OR_RETURN(WeightFormat f, ResolveCpuWeightFormat(*ckpt, WeightFormat::kAuto));
//   TS_ASSIGN_OR_RETURN(CpuLayerWeights layer0, LoadCpuLayerWeights(*ckpt, 0, f));
//   TS_ASSIGN_OR_RETURN(PackedMatrix head, LoadCpuHeadMatrix(*ckpt, f));
#pragma once

#include <array>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/packed_matrix.h"
#include "model/checkpoint.h"

namespace tessera {

// The name packages record for this file's panel layout; bump it whenever packed_matrix.h's
// layouts or the matrix stacking below change, so old packages are refused, not misread.
inline constexpr char kCpuPanelLayout[] = "tessera-cpu-panels-1";

// One decoder layer, packed. q/k/v are one matrix (rows q_dim + 2 kv_dim) and gate/up are
// one matrix (rows 2 * intermediate), so each needs one pass over the activations and one
// thread dispatch.
struct CpuLayerWeights {
  std::vector<float> input_norm;      // [hidden]
  PackedMatrix qkv;                   // [q_dim + 2 kv_dim, hidden]
  std::vector<float> qkv_bias;        // [q_dim + 2 kv_dim], empty without biases
  PackedMatrix o_proj;                // [hidden, q_dim]
  std::vector<float> o_bias;          // [hidden] or empty
  std::vector<float> q_norm, k_norm;  // [head_dim] or empty
  std::vector<float> post_attn_norm;  // [hidden]
  PackedMatrix gate_up;               // [2 intermediate, hidden]
  PackedMatrix down_proj;             // [hidden, intermediate]
};

// The packed matrices of a layer, in a fixed order, with their logical shapes.
enum class CpuMatrix { kQkv, kOProj, kGateUp, kDownProj };
inline constexpr std::array<CpuMatrix, 4> kCpuLayerMatrices = {
    CpuMatrix::kQkv, CpuMatrix::kOProj, CpuMatrix::kGateUp, CpuMatrix::kDownProj};
std::string_view CpuMatrixName(CpuMatrix m);  // "qkv", "o_proj", "gate_up", "down_proj"
struct MatrixShape {
  int64_t rows = 0;
  int64_t cols = 0;
};
MatrixShape CpuMatrixShape(const ModelDims& dims, CpuMatrix m);
PackedMatrix& CpuLayerMatrix(CpuLayerWeights& layer, CpuMatrix m);
inline const PackedMatrix& CpuLayerMatrix(const CpuLayerWeights& layer, CpuMatrix m) {
  return CpuLayerMatrix(const_cast<CpuLayerWeights&>(layer), m);  // same member, read-only
}

// The concrete format for `requested`: kAuto is BF16 for BF16/F16 checkpoints, F32 for F32
// ones, and the package's own format for a package. A package asked for another format is an
// error that says how to get one.
Expected<WeightFormat> ResolveCpuWeightFormat(const Checkpoint& ckpt, WeightFormat requested);

// Packing from a source checkpoint spreads each matrix's panels over `pool` when one is given
// (it must be idle: not called from inside one of its own jobs). Views of a package never
// need it.
Expected<CpuLayerWeights> LoadCpuLayerWeights(const Checkpoint& ckpt, int64_t layer,
                                              WeightFormat format, ThreadPool* pool = nullptr);
Expected<PackedMatrix> LoadCpuHeadMatrix(const Checkpoint& ckpt, WeightFormat format,
                                         ThreadPool* pool = nullptr);

}  // namespace tessera
