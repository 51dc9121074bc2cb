#include "format/ggml_type.h"

#include <array>

namespace tessera {
namespace {

// Block geometry from ggml-common.h (QK_K = 256). Sizes are the C structs' sizes, which have
// no padding (ggml static_asserts that).
constexpr std::array<GgmlTypeTraits, 35> kTypes = {{
    {GgmlType::kF32, "F32", 1, 4},
    {GgmlType::kF16, "F16", 1, 2},
    {GgmlType::kQ4_0, "Q4_0", 32, 2 + 16},
    {GgmlType::kQ4_1, "Q4_1", 32, 4 + 16},
    {GgmlType::kQ5_0, "Q5_0", 32, 2 + 4 + 16},
    {GgmlType::kQ5_1, "Q5_1", 32, 4 + 4 + 16},
    {GgmlType::kQ8_0, "Q8_0", 32, 2 + 32},
    {GgmlType::kQ8_1, "Q8_1", 32, 4 + 32},
    {GgmlType::kQ2_K, "Q2_K", 256, 16 + 64 + 4},
    {GgmlType::kQ3_K, "Q3_K", 256, 32 + 64 + 12 + 2},
    {GgmlType::kQ4_K, "Q4_K", 256, 4 + 12 + 128},
    {GgmlType::kQ5_K, "Q5_K", 256, 4 + 12 + 32 + 128},
    {GgmlType::kQ6_K, "Q6_K", 256, 128 + 64 + 16 + 2},
    {GgmlType::kQ8_K, "Q8_K", 256, 4 + 256 + 32},
    {GgmlType::kIQ2_XXS, "IQ2_XXS", 256, 2 + 64},
    {GgmlType::kIQ2_XS, "IQ2_XS", 256, 2 + 64 + 8},
    {GgmlType::kIQ3_XXS, "IQ3_XXS", 256, 2 + 96},
    {GgmlType::kIQ1_S, "IQ1_S", 256, 2 + 32 + 16},
    {GgmlType::kIQ4_NL, "IQ4_NL", 32, 2 + 16},
    {GgmlType::kIQ3_S, "IQ3_S", 256, 2 + 64 + 8 + 32 + 4},
    {GgmlType::kIQ2_S, "IQ2_S", 256, 2 + 64 + 8 + 8},
    {GgmlType::kIQ4_XS, "IQ4_XS", 256, 2 + 2 + 4 + 128},
    {GgmlType::kI8, "I8", 1, 1},
    {GgmlType::kI16, "I16", 1, 2},
    {GgmlType::kI32, "I32", 1, 4},
    {GgmlType::kI64, "I64", 1, 8},
    {GgmlType::kF64, "F64", 1, 8},
    {GgmlType::kIQ1_M, "IQ1_M", 256, 32 + 16 + 8},
    {GgmlType::kBF16, "BF16", 1, 2},
    {GgmlType::kTQ1_0, "TQ1_0", 256, 48 + 4 + 2},
    {GgmlType::kTQ2_0, "TQ2_0", 256, 64 + 2},
    {GgmlType::kMXFP4, "MXFP4", 32, 1 + 16},
    {GgmlType::kNVFP4, "NVFP4", 64, 4 + 32},
    {GgmlType::kQ1_0, "Q1_0", 128, 2 + 16},
    {GgmlType::kQ2_0, "Q2_0", 64, 2 + 16},
}};

}  // namespace

const GgmlTypeTraits* FindGgmlType(uint32_t id) {
  for (const GgmlTypeTraits& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == id) return &t;
  }
  return nullptr;
}

const GgmlTypeTraits& GgmlTraits(GgmlType type) {
  const GgmlTypeTraits* t = FindGgmlType(static_cast<uint32_t>(type));
  return t ? *t : kTypes[0];  // every enumerator is in the table (tested)
}

std::string_view GgmlTypeName(GgmlType type) {
  return GgmlTraits(type).name;
}

Expected<uint64_t> GgmlRowBytes(GgmlType type, uint64_t elements) {
  const GgmlTypeTraits& t = GgmlTraits(type);
  if (elements % t.block_elements != 0) {
    return Corrupt(std::to_string(elements) + " elements of " + t.name +
                   " are not a whole number of its " + std::to_string(t.block_elements) +
                   "-element blocks");
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements / t.block_elements, uint64_t{t.block_bytes}, &bytes)) {
    return Corrupt(std::to_string(elements) + " elements of " + t.name + " overflow 64 bits");
  }
  return bytes;
}

}  // namespace tessera
