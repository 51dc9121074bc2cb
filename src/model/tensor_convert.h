// Widening checkpoint tensors (F32/F16/BF16) to fp32, whole or by rows, and TensorRef: a
// tensor with the scales binding folds into it, applied on every widening.
//
//   std::vector<float> w;
//   TS_RETURN_IF_ERROR(WidenToF32(*tensors.layers[0].q_proj, &w));
//   TS_RETURN_IF_ERROR(WidenRowsToF32(*tensors.embed, token_id, 1, row_span));
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "format/safetensors.h"

namespace tessera {

// A checkpoint tensor as the model uses it: value' = (value + offset) * scale, computed in
// fp32 when widened. offset 1 turns a zero-centred norm weight (1 + w) into a plain one; scale
// carries scales a family applies to a linear map's output (MiniCPM's residual and logit
// scales, an embedding scale), so that no backend applies them. Null for absent tensors.
struct TensorRef {
  const TensorInfo* info = nullptr;
  float offset = 0.0f;
  float scale = 1.0f;
  explicit operator bool() const { return info != nullptr; }
  const TensorInfo* operator->() const { return info; }  // name, shape, dtype: unaffected
  bool folded() const { return offset != 0.0f || scale != 1.0f; }
};

// The folded values; *out is resized to the element count.
Status WidenToF32(const TensorRef& tensor, std::vector<float>* out);
Status WidenRowsToF32(const TensorRef& tensor, int64_t first_row, int64_t n_rows,
                      std::span<float> out);
// As WidenToF32 for a tensor the model may lack: an absent one leaves *out empty.
Status WidenToF32OrClear(const TensorRef& tensor, std::vector<float>* out);

// Resizes *out to the tensor's element count and fills it.
Status WidenToF32(const TensorInfo& tensor, std::vector<float>* out);

// Rows [first_row, first_row + n_rows) of a tensor seen as [shape[0], rest]; out holds
// exactly n_rows * row_size floats.
Status WidenRowsToF32(const TensorInfo& tensor, int64_t first_row, int64_t n_rows,
                      std::span<float> out);

}  // namespace tessera
