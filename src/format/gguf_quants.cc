#include "format/gguf_quants.h"

#include <array>
#include <cstring>

#include "base/half.h"

namespace tessera {
namespace {

// Q5_0 and Q5_1 too: llama-quantize falls back to them in Q4_K_M/Q5_K_M files for matrices
// whose rows are not whole 256-value super-blocks (Qwen2.5-0.5B's 896 columns).
constexpr std::array<GgmlType, 12> kSupported = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,
    GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kIQ4_NL};

// IQ4_NL's 16 non-uniform levels (ggml's kvalues_iq4nl), scaled by the block's d.
constexpr int8_t kIq4NlLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};

uint16_t LoadU16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
float LoadF16(const uint8_t* p) {
  return F16ToFloat(LoadU16(p));
}

// Q8_0: {f16 d; int8 q[32]}: x = d * q.
void DequantizeQ8_0(const uint8_t* b, float* y) {
  const float d = LoadF16(b);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(static_cast<int8_t>(b[2 + j]));
}

// Q4_0: {f16 d; u8 qs[16]}: byte j holds element j (low nibble) and j + 16 (high); x = d*(q-8).
void DequantizeQ4_0(const uint8_t* b, float* y) {
  const float d = LoadF16(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((qs[j] & 0x0f) - 8);
    y[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

// Q4_1: {f16 d; f16 m; u8 qs[16]}: x = d * q + m, nibbles as Q4_0.
void DequantizeQ4_1(const uint8_t* b, float* y) {
  const float d = LoadF16(b);
  const float m = LoadF16(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(qs[j] & 0x0f) + m;
    y[j + 16] = d * static_cast<float>(qs[j] >> 4) + m;
  }
}

// Q5_0: {f16 d; u8 qh[4]; u8 qs[16]}: the low four bits as Q4_0's nibbles, the fifth bit of
// element j in bit j of qh (little-endian u32); x = d * (q - 16).
// Q5_1: {f16 d; f16 m; u8 qh[4]; u8 qs[16]}: the same bits; x = d * q + m.
void DequantizeQ5(const uint8_t* b, float d, float m, int offset, float* y) {
  uint32_t qh = 0;
  std::memcpy(&qh, b, 4);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
    const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    y[j] = d * static_cast<float>(lo - offset) + m;
    y[j + 16] = d * static_cast<float>(hi - offset) + m;
  }
}
void DequantizeQ5_0(const uint8_t* b, float* y) {
  DequantizeQ5(b + 2, LoadF16(b), 0.0f, 16, y);
}
void DequantizeQ5_1(const uint8_t* b, float* y) {
  DequantizeQ5(b + 4, LoadF16(b), LoadF16(b + 2), 0, y);
}

// IQ4_NL: {f16 d; u8 qs[16]}: x = d * levels[q], nibbles as Q4_0.
void DequantizeIq4Nl(const uint8_t* b, float* y) {
  const float d = LoadF16(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(kIq4NlLevels[qs[j] & 0x0f]);
    y[j + 16] = d * static_cast<float>(kIq4NlLevels[qs[j] >> 4]);
  }
}

// The K-quants' 12 scale bytes hold 8 six-bit (scale, min) pairs: pairs 0-3 in the low six bits
// of bytes 0-3 (scales) and 4-7 (mins); pairs 4-7 in the nibbles of bytes 8-11 with their top
// two bits in the high two bits of bytes 0-3 (scales) and 4-7 (mins).
void ScaleMinK4(int j, const uint8_t* q, int* scale, int* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// The K-quants with 8 sub-blocks of 32 (Q4_K, Q5_K): each sub-block's multiplier d * scale and
// offset dmin * min.
void SubBlockScalesK4(const uint8_t* b, float* sub_d, float* sub_min) {
  const float d = LoadF16(b);
  const float dmin = LoadF16(b + 2);
  for (int s = 0; s < 8; ++s) {
    int scale, min;
    ScaleMinK4(s, b + 4, &scale, &min);
    sub_d[s] = d * static_cast<float>(scale);
    sub_min[s] = dmin * static_cast<float>(min);
  }
}

// Q4_K: {f16 d; f16 dmin; u8 scales[12]; u8 qs[128]}, 8 sub-blocks of 32. Each 32 bytes of
// qs hold two sub-blocks: the low nibbles the even one, the high nibbles the odd one.
// x = d * scale * q - dmin * min.
void DequantizeQ4_K(const uint8_t* b, float* y) {
  float sub_d[8], sub_min[8];
  SubBlockScalesK4(b, sub_d, sub_min);
  const uint8_t* qs = b + 16;
  for (int e = 0; e < 256; ++e) {
    const int sub = e / 32;
    const uint8_t byte = qs[32 * (sub / 2) + e % 32];
    const int q = sub % 2 ? byte >> 4 : byte & 0x0f;
    y[e] = sub_d[sub] * static_cast<float>(q) - sub_min[sub];
  }
}

// Q5_K: {f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}: Q4_K plus a fifth bit, for
// sub-block s element l, in bit s of qh[l].
void DequantizeQ5_K(const uint8_t* b, float* y) {
  float sub_d[8], sub_min[8];
  SubBlockScalesK4(b, sub_d, sub_min);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int e = 0; e < 256; ++e) {
    const int sub = e / 32, l = e % 32;
    const uint8_t byte = qs[32 * (sub / 2) + l];
    const int q = (sub % 2 ? byte >> 4 : byte & 0x0f) | (((qh[l] >> sub) & 1) << 4);
    y[e] = sub_d[sub] * static_cast<float>(q) - sub_min[sub];
  }
}

// Q6_K: {u8 ql[128]; u8 qh[64]; int8 scales[16]; f16 d}, 16 sub-blocks of 16, in two halves of
// 128. In half h, element 32*k + l (k = 0..3, l = 0..31) takes its low four bits from
// ql[64h + l + 32*(k&1)] (low nibble for k < 2, high for k >= 2) and its top two from bits
// 2k..2k+1 of qh[32h + l]; x = d * scales[8h + 2k + l/16] * (q - 32).
void DequantizeQ6_K(const uint8_t* b, float* y) {
  const uint8_t* ql_all = b;
  const uint8_t* qh_all = b + 128;
  const int8_t* sc_all = reinterpret_cast<const int8_t*>(b + 192);
  const float d = LoadF16(b + 208);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = ql_all + 64 * h;
    const uint8_t* qh = qh_all + 32 * h;
    const int8_t* sc = sc_all + 8 * h;
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t low_byte = ql[l + 32 * (k & 1)];
        const int low = k < 2 ? (low_byte & 0x0f) : (low_byte >> 4);
        const int q = (low | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
        y[128 * h + 32 * k + l] =
            d * static_cast<float>(sc[2 * k + l / 16]) * static_cast<float>(q);
      }
    }
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn BlockFunction(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0:
      return DequantizeQ8_0;
    case GgmlType::kQ4_0:
      return DequantizeQ4_0;
    case GgmlType::kQ4_1:
      return DequantizeQ4_1;
    case GgmlType::kQ5_0:
      return DequantizeQ5_0;
    case GgmlType::kQ5_1:
      return DequantizeQ5_1;
    case GgmlType::kIQ4_NL:
      return DequantizeIq4Nl;
    case GgmlType::kQ4_K:
      return DequantizeQ4_K;
    case GgmlType::kQ5_K:
      return DequantizeQ5_K;
    case GgmlType::kQ6_K:
      return DequantizeQ6_K;
    default:
      return nullptr;
  }
}

}  // namespace

bool IsDequantizable(GgmlType type) {
  for (GgmlType t : kSupported) {
    if (t == type) return true;
  }
  return false;
}

std::string DequantizableTypesText() {
  std::string out;
  for (GgmlType t : kSupported) out += (out.empty() ? "" : ", ") + std::string(GgmlTypeName(t));
  return out;
}

Status CheckDequantizable(GgmlType type) {
  if (IsDequantizable(type)) return Status::Ok();
  return Unsupported(std::string(GgmlTypeName(type)) +
                     " is not supported; supported: " + DequantizableTypesText());
}

Status DequantizeToF32(GgmlType type, std::span<const uint8_t> bytes, std::span<float> out) {
  TS_RETURN_IF_ERROR(CheckDequantizable(type));
  const GgmlTypeTraits& traits = GgmlTraits(type);
  auto expected = GgmlRowBytes(type, out.size());
  if (!expected) return InvalidArgument(expected.status().message());
  if (bytes.size() != *expected) {
    return InvalidArgument(std::to_string(out.size()) + " elements of " + traits.name + " take " +
                           std::to_string(*expected) + " bytes, given " +
                           std::to_string(bytes.size()));
  }
  const uint8_t* p = bytes.data();
  float* y = out.data();
  const size_t n = out.size();
  switch (type) {
    case GgmlType::kF32:
      if (n != 0) std::memcpy(y, p, n * sizeof(float));
      return Status::Ok();
    case GgmlType::kF16:
      for (size_t i = 0; i < n; ++i) y[i] = LoadF16(p + 2 * i);
      return Status::Ok();
    case GgmlType::kBF16:
      for (size_t i = 0; i < n; ++i) y[i] = Bf16ToFloat(LoadU16(p + 2 * i));
      return Status::Ok();
    default:
      break;
  }
  const BlockFn fn = BlockFunction(type);
  const size_t blocks = n / traits.block_elements;
  for (size_t i = 0; i < blocks; ++i) {
    fn(p + i * traits.block_bytes, y + i * traits.block_elements);
  }
  return Status::Ok();
}

Status DequantizeRows(const GgufTensor& tensor, uint64_t first_row, uint64_t n_rows,
                      std::span<float> out) {
  const uint64_t rows = tensor.rows();
  if (first_row > rows || n_rows > rows - first_row) {
    return OutOfRange("tensor '" + tensor.name + "' has " + std::to_string(rows) + " rows; rows " +
                      std::to_string(first_row) + ".." + std::to_string(first_row + n_rows) +
                      " were asked for");
  }
  const uint64_t row_elements = tensor.dims.empty() ? 0 : tensor.dims[0];
  if (out.size() != n_rows * row_elements) {
    return InvalidArgument("tensor '" + tensor.name + "': " + std::to_string(n_rows) + " rows of " +
                           std::to_string(row_elements) + " need " +
                           std::to_string(n_rows * row_elements) + " floats, given " +
                           std::to_string(out.size()));
  }
  auto row_bytes = GgmlRowBytes(tensor.type, row_elements);
  if (!row_bytes) return row_bytes.status();
  const uint64_t begin = first_row * *row_bytes;
  if (begin + n_rows * *row_bytes > tensor.data.size()) {
    return Internal("tensor '" + tensor.name + "' data is shorter than its shape");
  }
  Status status =
      DequantizeToF32(tensor.type, tensor.data.subspan(begin, n_rows * *row_bytes), out);
  return status.WithContext("tensor '" + tensor.name + "'");
}

}  // namespace tessera
