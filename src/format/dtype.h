// Element types of tensors in checkpoints and packages.
//
//   auto dt = ParseSafetensorsDType("BF16");   // DType::kBF16
//   size_t bytes = DTypeSize(*dt) * n;
#pragma once

#include <cstddef>
#include <string_view>

#include "base/status.h"

namespace tessera {

// kGgmlBlocks: a GGUF tensor in one of ggml's block-quantized types (TensorInfo::ggml_type
// says which); it has no per-element size (DTypeSize 0) and is never read from safetensors.
enum class DType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool, kGgmlBlocks };

// Safetensors spelling ("F32", "BF16", ...). Unknown names (including the FP8 kinds, which
// tessera does not read) are an error that lists what is supported.
Expected<DType> ParseSafetensorsDType(std::string_view name);
std::string_view DTypeName(DType dtype);
size_t DTypeSize(DType dtype);
// True for the dtypes model weights may have: F32, F16, BF16.
bool IsFloatWeightDType(DType dtype);

}  // namespace tessera
