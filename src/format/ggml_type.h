// ggml's tensor element types as GGUF files number them: names and block geometry (how many
// elements one block holds and how many bytes it takes), for every type ggml defines, so that
// a file's tensor sizes can be checked whether or not tessera can convert the type.
//
//   const GgmlTypeTraits* t = FindGgmlType(12);  // Q4_K: 256 elements in 144 bytes
//   auto bytes = GgmlRowBytes(GgmlType::kQ4_K, 4096);  // 2304, or an error if not whole blocks
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tessera {

// The ids are ggml's (ggml.h enum ggml_type); gaps are ids ggml removed.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
  kQ2_0 = 42,
};

struct GgmlTypeTraits {
  GgmlType type = GgmlType::kF32;
  const char* name = "";        // ggml's spelling: "Q4_K", "BF16"
  uint32_t block_elements = 1;  // elements per block (1 for plain types)
  uint32_t block_bytes = 4;     // bytes per block
};

// Null for an id ggml does not define (or removed).
const GgmlTypeTraits* FindGgmlType(uint32_t id);
const GgmlTypeTraits& GgmlTraits(GgmlType type);
std::string_view GgmlTypeName(GgmlType type);

// Bytes of `elements` consecutive elements (a row): elements must be a whole number of blocks.
Expected<uint64_t> GgmlRowBytes(GgmlType type, uint64_t elements);

}  // namespace tessera
