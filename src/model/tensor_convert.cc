#include "model/tensor_convert.h"

#include <cstring>

#include "base/half.h"
#include "format/gguf_quants.h"

namespace tessera {
namespace {

Status WidenElements(DType dtype, const uint8_t* src, size_t n, float* dst) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return Status::Ok();
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, src + 2 * i, 2);
        dst[i] = Bf16ToFloat(v);
      }
      return Status::Ok();
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, src + 2 * i, 2);
        dst[i] = F16ToFloat(v);
      }
      return Status::Ok();
    default:
      return Unsupported("cannot widen dtype " + std::string(DTypeName(dtype)) + " to F32");
  }
}

}  // namespace

Status WidenToF32(const TensorInfo& tensor, std::vector<float>* out) {
  out->resize(static_cast<size_t>(tensor.num_elements));
  if (tensor.dtype == DType::kGgmlBlocks) {
    return DequantizeToF32(tensor.ggml_type, tensor.data, *out)
        .WithContext("tensor '" + tensor.name + "'");
  }
  if (tensor.data.size() != tensor.num_elements * DTypeSize(tensor.dtype)) {
    return Corrupt("tensor '" + tensor.name + "' data size does not match its shape");
  }
  return WidenElements(tensor.dtype, tensor.data.data(), out->size(), out->data());
}

Status WidenRowsToF32(const TensorInfo& tensor, int64_t first_row, int64_t n_rows,
                      std::span<float> out) {
  if (tensor.shape.empty() || tensor.shape[0] <= 0) {
    return InvalidArgument("tensor '" + tensor.name + "' has no rows");
  }
  uint64_t rows = static_cast<uint64_t>(tensor.shape[0]);
  uint64_t row_size = tensor.num_elements / rows;
  if (first_row < 0 || n_rows < 0 || static_cast<uint64_t>(first_row + n_rows) > rows) {
    return OutOfRange("rows [" + std::to_string(first_row) + ", " +
                      std::to_string(first_row + n_rows) + ") are outside tensor '" + tensor.name +
                      "' with " + std::to_string(rows) + " rows");
  }
  size_t n = static_cast<size_t>(n_rows) * row_size;
  if (out.size() != n) return InvalidArgument("output span has the wrong size");
  if (tensor.dtype == DType::kGgmlBlocks) {
    TS_ASSIGN_OR_RETURN(uint64_t row_bytes, GgmlRowBytes(tensor.ggml_type, row_size));
    if (tensor.data.size() != rows * row_bytes) {
      return Corrupt("tensor '" + tensor.name + "' data size does not match its shape");
    }
    return DequantizeToF32(tensor.ggml_type,
                           tensor.data.subspan(first_row * row_bytes, n_rows * row_bytes), out)
        .WithContext("tensor '" + tensor.name + "'");
  }
  size_t esize = DTypeSize(tensor.dtype);
  return WidenElements(tensor.dtype, tensor.data.data() + first_row * row_size * esize, n,
                       out.data());
}

namespace {

void Fold(const TensorRef& t, std::span<float> values) {
  if (!t.folded()) return;
  for (float& v : values) v = (v + t.offset) * t.scale;
}

}  // namespace

Status WidenToF32(const TensorRef& tensor, std::vector<float>* out) {
  if (!tensor) return Internal("widening an absent tensor");
  TS_RETURN_IF_ERROR(WidenToF32(*tensor.info, out));
  Fold(tensor, *out);
  return Status::Ok();
}

Status WidenRowsToF32(const TensorRef& tensor, int64_t first_row, int64_t n_rows,
                      std::span<float> out) {
  if (!tensor) return Internal("widening an absent tensor");
  TS_RETURN_IF_ERROR(WidenRowsToF32(*tensor.info, first_row, n_rows, out));
  Fold(tensor, out);
  return Status::Ok();
}

Status WidenToF32OrClear(const TensorRef& tensor, std::vector<float>* out) {
  out->clear();
  return tensor ? WidenToF32(tensor, out) : Status::Ok();
}

}  // namespace tessera
