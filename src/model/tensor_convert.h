// Widening checkpoint tensors (F32/F16/BF16) to fp32, whole or by rows.
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

// Resizes *out to the tensor's element count and fills it.
Status WidenToF32(const TensorInfo& tensor, std::vector<float>* out);

// Rows [first_row, first_row + n_rows) of a tensor seen as [shape[0], rest]; out holds
// exactly n_rows * row_size floats.
Status WidenRowsToF32(const TensorInfo& tensor, int64_t first_row, int64_t n_rows,
                      std::span<float> out);

}  // namespace tessera
