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

// One decoder layer, packed. The input projections are one matrix (attention: q, k, v with
// rows q_proj_rows + 2 kv_dim; DeltaNet: qkv, z, b, a) and gate/up are one matrix (rows
// 2 * intermediate), so each needs one pass over the activations and one thread dispatch.
// Norm weights and small vectors are fp32 with the spec's folds applied.
struct CpuLayerWeights {
  LayerSpec spec;
  std::vector<float> input_norm;      // [hidden]
  PackedMatrix qkv;                   // attention [q_proj_rows + 2 kv_dim, hidden];
                                      // DeltaNet [conv_width + v_width + 2 value_heads, hidden]
  std::vector<float> qkv_bias;        // [q_dim + 2 kv_dim], empty without biases
  PackedMatrix o_proj;                // attention [hidden, q_dim]; DeltaNet [hidden, v_width]
  std::vector<float> o_bias;          // [hidden] or empty
  std::vector<float> q_norm, k_norm;  // [head_dim] or empty
  std::vector<float> attn_out_norm;   // [hidden] or empty (gemma3)
  std::vector<float> conv1d;          // DeltaNet [conv_kernel][conv_width] (transposed)
  std::vector<float> dt_bias, a_log;  // DeltaNet [value_heads]
  std::vector<float> delta_norm;      // DeltaNet [value_dim]
  std::vector<float> post_attn_norm;  // [hidden]
  PackedMatrix gate_up;               // [2 intermediate, hidden]
  PackedMatrix down_proj;             // [hidden, intermediate]
  std::vector<float> mlp_out_norm;    // [hidden] or empty (gemma3)
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
MatrixShape CpuMatrixShape(const ModelSpec& spec, int64_t layer, CpuMatrix m);
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
