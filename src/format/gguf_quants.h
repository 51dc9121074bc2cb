// Scalar conversion of GGUF tensor data to fp32 for the weight types people download: F32,
// F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K and IQ4_NL (block layouts as ggml-common.h
// defines them). Every other ggml type is refused by name.
//
//   TS_RETURN_IF_ERROR(CheckDequantizable(t->type));  // "Q2_K is not supported; supported: ..."
//   std::vector<float> row(t->dims[0]);
//   TS_RETURN_IF_ERROR(DequantizeRows(*t, /*first_row=*/5, /*n_rows=*/1, row));
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"
#include "format/ggml_type.h"
#include "format/gguf.h"

namespace tessera {

bool IsDequantizable(GgmlType type);
// "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL"
std::string DequantizableTypesText();
// Ok, or kUnsupported naming the type and listing the supported ones.
Status CheckDequantizable(GgmlType type);

// `bytes` holds exactly out.size() elements of `type` (whole blocks; GgmlRowBytes), else
// kInvalidArgument. An unsupported type is kUnsupported.
Status DequantizeToF32(GgmlType type, std::span<const uint8_t> bytes, std::span<float> out);

// Rows [first_row, first_row + n_rows) of a tensor, a row being dims[0] elements; `out` holds
// exactly n_rows * dims[0] floats.
Status DequantizeRows(const GgufTensor& tensor, uint64_t first_row, uint64_t n_rows,
                      std::span<float> out);

}  // namespace tessera
