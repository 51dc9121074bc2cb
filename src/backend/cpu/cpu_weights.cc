#include "backend/cpu/cpu_weights.h"

#include <algorithm>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "model/tensor_convert.h"

namespace tessera {
namespace {

// Stacks row-major matrices that share a column count and packs them as one, widening 16
// rows at a time straight from the checkpoint's bytes (no fp32 copy of a whole matrix).
Expected<PackedMatrix> PackStacked(std::initializer_list<TensorRef> parts, WeightFormat f,
                                   ThreadPool* pool) {
  std::vector<TensorRef> stack;
  std::vector<int64_t> first_row;  // stacked row where each part starts
  int64_t rows = 0, cols = 0;
  for (const TensorRef& t : parts) {
    if (!t || t->shape.size() != 2) return Internal("cpu backend: expected a matrix");
    if (cols != 0 && t->shape[1] != cols)
      return Internal("cpu backend: stacked matrices differ in width");
    stack.push_back(t);
    first_row.push_back(rows);
    rows += t->shape[0];
    cols = t->shape[1];
  }
  auto source = [&](int64_t first, int64_t count, std::span<float> out) -> Status {
    // A range may span the boundary between two parts (q | k | v); copy each piece.
    size_t done = 0;
    for (size_t i = 0; i < stack.size() && count > 0; ++i) {
      const int64_t begin = first_row[i], end = begin + stack[i]->shape[0];
      if (first >= end) continue;
      const int64_t n = std::min(count, end - first);
      const auto values = static_cast<size_t>(n * cols);
      TS_RETURN_IF_ERROR(WidenRowsToF32(stack[i], first - begin, n, out.subspan(done, values)));
      done += values;
      first += n;
      count -= n;
    }
    return count == 0 ? Status::Ok() : Internal("cpu backend: stacked rows out of range");
  };
  return PackMatrixFrom(source, rows, cols, f, pool);
}

std::span<const uint8_t> BytesOf(const TensorInfo* t) {
  return t ? t->data : std::span<const uint8_t>{};
}

Expected<PackedMatrix> ViewPacked(const Checkpoint& ckpt, const PackedMatrixTensors& t,
                                  WeightFormat format, MatrixShape shape, const std::string& what) {
  auto m = ViewPackedMatrix(
      format, shape.rows, shape.cols,
      {BytesOf(t.data), BytesOf(t.row_scale), BytesOf(t.row_offset), BytesOf(t.block_scale)});
  if (!m) {
    return Corrupt("package " + ckpt.dir + ": " + what + ": " + m.status().message() +
                   "; re-convert it with tessera convert");
  }
  return m;
}

}  // namespace

std::string_view CpuMatrixName(CpuMatrix m) {
  switch (m) {
    case CpuMatrix::kQkv:
      return "qkv";
    case CpuMatrix::kOProj:
      return "o_proj";
    case CpuMatrix::kGateUp:
      return "gate_up";
    case CpuMatrix::kDownProj:
      return "down_proj";
  }
  return "?";
}

MatrixShape CpuMatrixShape(const ModelSpec& d, int64_t layer, CpuMatrix m) {
  const bool attention = d.layer[static_cast<size_t>(layer)].is_attention();
  switch (m) {
    case CpuMatrix::kQkv:
      if (!attention) {
        const DeltaNetSpec& n = *d.deltanet;
        return {n.conv_width() + n.v_width() + 2 * n.value_heads, d.hidden};
      }
      return {d.q_proj_rows() + 2 * d.kv_dim, d.hidden};
    case CpuMatrix::kOProj:
      return {d.hidden, attention ? d.q_dim : d.deltanet->v_width()};
    case CpuMatrix::kGateUp:
      return {2 * d.intermediate, d.hidden};
    case CpuMatrix::kDownProj:
      return {d.hidden, d.intermediate};
  }
  return {};
}

PackedMatrix& CpuLayerMatrix(CpuLayerWeights& layer, CpuMatrix m) {
  switch (m) {
    case CpuMatrix::kQkv:
      return layer.qkv;
    case CpuMatrix::kOProj:
      return layer.o_proj;
    case CpuMatrix::kGateUp:
      return layer.gate_up;
    case CpuMatrix::kDownProj:
      break;
  }
  return layer.down_proj;
}

Expected<WeightFormat> ResolveCpuWeightFormat(const Checkpoint& ckpt, WeightFormat requested) {
  if (const auto& packed = ckpt.tensors.packed) {
    if (packed->layout != kCpuPanelLayout) {
      return Unsupported("package " + ckpt.dir + " holds weights in layout '" + packed->layout +
                         "', this tessera's cpu backend reads '" + kCpuPanelLayout +
                         "'; re-convert it with tessera convert");
    }
    auto format = ParseWeightFormat(packed->format);
    if (!format || *format == WeightFormat::kAuto) {
      return Corrupt("package " + ckpt.dir + " names an unknown weight format '" + packed->format +
                     "'; re-convert it with tessera convert");
    }
    if (requested != WeightFormat::kAuto && requested != *format) {
      return InvalidArgument("package " + ckpt.dir + " holds " + packed->format + " weights, not " +
                             std::string(WeightFormatName(requested)) + "; use --dtype " +
                             packed->format +
                             " (or auto), or convert the source checkpoint with --dtype " +
                             std::string(WeightFormatName(requested)));
    }
    return *format;
  }
  if (requested != WeightFormat::kAuto) return requested;
  // One format for the whole model, from its first projection (the embedding if none): F32
  // stays exact, F16/BF16 become BF16 panels, and a GGUF file's block-quantized weights are
  // repacked into INT8 panels. Why INT8 for blocks: BF16 panels stream 2-4x the bytes of the
  // blocks (decode 0.8x llama.cpp's on Q4_K_M), the INT8 repack decodes about 2x llama.cpp's,
  // and its logit error against the exact dequantized product is about twice llama.cpp's own
  // (docs/models.md, bench/results/gguf.md); `--dtype bf16` or `f32` trade speed back for it.
  const auto& layers = ckpt.tensors.layers;
  const TensorInfo* sample =
      !layers.empty() && layers[0].gate_proj ? layers[0].gate_proj.info : ckpt.tensors.embed.info;
  if (sample && sample->dtype == DType::kGgmlBlocks) return WeightFormat::kInt8;
  return sample && sample->dtype == DType::kF32 ? WeightFormat::kF32 : WeightFormat::kBF16;
}

Expected<CpuLayerWeights> LoadCpuLayerWeights(const Checkpoint& ckpt, int64_t layer,
                                              WeightFormat format, ThreadPool* pool) {
  const ModelSpec& d = ckpt.tensors.spec;
  if (layer < 0 || layer >= d.layers) return Internal("cpu backend: layer index out of range");
  const LayerTensors& src = ckpt.tensors.layers[static_cast<size_t>(layer)];
  CpuLayerWeights L;
  L.spec = d.layer[static_cast<size_t>(layer)];
  const std::pair<const TensorRef*, std::vector<float>*> vectors[] = {
      {&src.input_norm, &L.input_norm},
      {&src.post_attn_norm, &L.post_attn_norm},
      {&src.q_norm, &L.q_norm},
      {&src.k_norm, &L.k_norm},
      {&src.o_bias, &L.o_bias},
      {&src.attn_out_norm, &L.attn_out_norm},
      {&src.mlp_out_norm, &L.mlp_out_norm},
      {&src.conv1d, &L.conv1d},
      {&src.dt_bias, &L.dt_bias},
      {&src.a_log, &L.a_log},
      {&src.delta_norm, &L.delta_norm}};
  for (const auto& [ref, out] : vectors) TS_RETURN_IF_ERROR(WidenToF32OrClear(*ref, out));
  if (!L.conv1d.empty()) {
    // [channel][tap] -> [tap][channel]: the conv runs over contiguous channels.
    const DeltaNetSpec& n = *d.deltanet;
    std::vector<float> taps(L.conv1d.size());
    for (int64_t c = 0; c < n.conv_width(); ++c) {
      for (int64_t j = 0; j < n.conv_kernel; ++j) {
        taps[static_cast<size_t>(j * n.conv_width() + c)] =
            L.conv1d[static_cast<size_t>(c * n.conv_kernel + j)];
      }
    }
    L.conv1d = std::move(taps);
  }
  if (const auto& packed = ckpt.tensors.packed) {
    const PackedLayerTensors& P = packed->layers[static_cast<size_t>(layer)];
    const std::string where = "layer " + std::to_string(layer) + " ";
    for (CpuMatrix m : kCpuLayerMatrices) {
      const PackedMatrixTensors& t = m == CpuMatrix::kQkv      ? P.qkv
                                     : m == CpuMatrix::kOProj  ? P.o_proj
                                     : m == CpuMatrix::kGateUp ? P.gate_up
                                                               : P.down_proj;
      TS_ASSIGN_OR_RETURN(PackedMatrix view,
                          ViewPacked(ckpt, t, format, CpuMatrixShape(d, layer, m),
                                     where + std::string(CpuMatrixName(m))));
      CpuLayerMatrix(L, m) = std::move(view);
    }
  } else {
    if (L.spec.is_attention()) {
      TS_ASSIGN_OR_RETURN(L.qkv, PackStacked({src.q_proj, src.k_proj, src.v_proj}, format, pool));
      TS_ASSIGN_OR_RETURN(L.o_proj, PackStacked({src.o_proj}, format, pool));
    } else {
      TS_ASSIGN_OR_RETURN(
          L.qkv, PackStacked({src.in_proj_qkv, src.in_proj_z, src.in_proj_b, src.in_proj_a}, format,
                             pool));
      TS_ASSIGN_OR_RETURN(L.o_proj, PackStacked({src.out_proj}, format, pool));
    }
    TS_ASSIGN_OR_RETURN(L.gate_up, PackStacked({src.gate_proj, src.up_proj}, format, pool));
    TS_ASSIGN_OR_RETURN(L.down_proj, PackStacked({src.down_proj}, format, pool));
  }
  if (src.q_bias || src.k_bias || src.v_bias) {
    // A missing part of the stacked bias is zero.
    L.qkv_bias.assign(static_cast<size_t>(d.q_dim + 2 * d.kv_dim), 0.0f);
    std::vector<float> part;
    int64_t offset = 0;
    for (auto [t, n] : {std::pair{src.q_bias, d.q_dim}, std::pair{src.k_bias, d.kv_dim},
                        std::pair{src.v_bias, d.kv_dim}}) {
      TS_RETURN_IF_ERROR(WidenToF32OrClear(t, &part));
      if (!part.empty() && static_cast<int64_t>(part.size()) != n)
        return Internal("cpu backend: bias size");
      std::copy(part.begin(), part.end(), L.qkv_bias.begin() + offset);
      offset += n;
    }
  }
  return L;
}

Expected<PackedMatrix> LoadCpuHeadMatrix(const Checkpoint& ckpt, WeightFormat format,
                                         ThreadPool* pool) {
  const ModelSpec& d = ckpt.tensors.spec;
  if (const auto& packed = ckpt.tensors.packed) {
    return ViewPacked(ckpt, packed->lm_head, format, {d.vocab, d.hidden}, "lm_head");
  }
  if (!ckpt.tensors.lm_head) return Internal("cpu backend: checkpoint has no LM head");
  return PackStacked({ckpt.tensors.lm_head}, format, pool);
}

Expected<WeightFormat> ResolveWeightFormat(const Checkpoint& ckpt, WeightFormat requested) {
  return ResolveCpuWeightFormat(ckpt, requested);
}

}  // namespace tessera
