// Dequantization: each block format is packed here by hand from its description (ggml-common.h)
// with chosen scales and quants, and the expected values computed from that description.
// Scales are powers of two and quants small integers, so every expected value is exact.
#include "format/gguf_quants.h"

#include <gtest/gtest.h>

#include <cstring>

#include "base/half.h"
#include "format_test_util.h"
#include "support/gguf_writer.h"

namespace tessera {
namespace {

using test::ExpectOneLineError;

void PutF16(std::string* b, size_t at, float v) {
  const uint16_t h = FloatToF16(v);
  (*b)[at] = static_cast<char>(h & 0xff);
  (*b)[at + 1] = static_cast<char>(h >> 8);
}

std::vector<float> Dequantize(GgmlType type, const std::string& bytes, size_t n) {
  std::vector<float> out(n, -12345.0f);
  Status s = DequantizeToF32(
      type, std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(GgufQuants, PlainFloatTypes) {
  const std::vector<float> f = {1.0f, -2.5f, 65504.0f, 0.0f};
  EXPECT_EQ(Dequantize(GgmlType::kF32, test::F32Bytes(f), 4), f);
  std::string f16(8, '\0');
  for (int i = 0; i < 4; ++i) PutF16(&f16, 2 * i, f[i]);
  EXPECT_EQ(Dequantize(GgmlType::kF16, f16, 4), f);
  // BF16 is the top half of the f32 bits: 1.0 = 0x3f80, -2.5 = 0xc020.
  const std::string bf16("\x80\x3f\x20\xc0", 4);
  EXPECT_EQ(Dequantize(GgmlType::kBF16, bf16, 2), (std::vector<float>{1.0f, -2.5f}));
}

TEST(GgufQuants, Q8_0) {
  // Two blocks: d = 0.5 then d = -2; q[j] = j - 16.
  std::string b(68, '\0');
  for (int blk = 0; blk < 2; ++blk) {
    PutF16(&b, 34 * blk, blk == 0 ? 0.5f : -2.0f);
    for (int j = 0; j < 32; ++j) b[34 * blk + 2 + j] = static_cast<char>(int8_t(j - 16));
  }
  const auto y = Dequantize(GgmlType::kQ8_0, b, 64);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y[j], 0.5f * (j - 16)) << j;
    EXPECT_EQ(y[32 + j], -2.0f * (j - 16)) << j;
  }
}

// Element e of a 32-element 4-bit block: byte e % 16, low nibble for e < 16, high otherwise.
std::string PackNibbles32(const int* q) {
  std::string out(16, '\0');
  for (int e = 0; e < 32; ++e)
    out[e % 16] = static_cast<char>(out[e % 16] | (q[e] << (e < 16 ? 0 : 4)));
  return out;
}

TEST(GgufQuants, Q4_0) {
  int q[32];
  for (int e = 0; e < 32; ++e) q[e] = (e * 7 + 3) % 16;
  std::string b(2, '\0');
  PutF16(&b, 0, 0.25f);
  b += PackNibbles32(q);
  const auto y = Dequantize(GgmlType::kQ4_0, b, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], 0.25f * (q[e] - 8)) << e;
}

TEST(GgufQuants, Q4_1) {
  int q[32];
  for (int e = 0; e < 32; ++e) q[e] = (e * 5 + 1) % 16;
  std::string b(4, '\0');
  PutF16(&b, 0, 0.5f);
  PutF16(&b, 2, -3.0f);
  b += PackNibbles32(q);
  const auto y = Dequantize(GgmlType::kQ4_1, b, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], 0.5f * q[e] - 3.0f) << e;
}

// Q5_0/Q5_1: four low bits as Q4's nibbles, the fifth bit of element e in bit e of qh.
std::string PackQ5(const int q[32]) {
  int low[32];
  uint32_t qh = 0;
  for (int e = 0; e < 32; ++e) {
    low[e] = q[e] & 15;
    qh |= static_cast<uint32_t>(q[e] >> 4) << e;
  }
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((qh >> (8 * i)) & 0xff);
  return out + PackNibbles32(low);
}

TEST(GgufQuants, Q5_0) {
  int q[32];
  for (int e = 0; e < 32; ++e) q[e] = (e * 11 + 5) % 32;
  std::string b(2, '\0');
  PutF16(&b, 0, 0.25f);
  b += PackQ5(q);
  ASSERT_EQ(b.size(), 22u);
  const auto y = Dequantize(GgmlType::kQ5_0, b, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], 0.25f * (q[e] - 16)) << e;
}

TEST(GgufQuants, Q5_1) {
  int q[32];
  for (int e = 0; e < 32; ++e) q[e] = (e * 13 + 7) % 32;
  std::string b(4, '\0');
  PutF16(&b, 0, 0.5f);
  PutF16(&b, 2, -4.0f);
  b += PackQ5(q);
  ASSERT_EQ(b.size(), 24u);
  const auto y = Dequantize(GgmlType::kQ5_1, b, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], 0.5f * q[e] - 4.0f) << e;
}

TEST(GgufQuants, Iq4Nl) {
  const int levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  int q[32];
  for (int e = 0; e < 32; ++e) q[e] = (e * 3 + 2) % 16;
  std::string b(2, '\0');
  PutF16(&b, 0, 0.125f);
  b += PackNibbles32(q);
  const auto y = Dequantize(GgmlType::kIQ4_NL, b, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], 0.125f * levels[q[e]]) << e;
}

// The K-quants' 12 scale bytes, packed from 8 six-bit scales and mins: sub-blocks 0-3 in the
// low six bits of bytes 0-3 (scale) and 4-7 (min); sub-blocks 4-7 keep their low four bits in
// byte 8 + (s - 4) (scale low nibble, min high nibble) and their top two bits in bits 6-7 of
// byte s - 4 (scale) and byte s (min).
std::string PackScalesK4(const int* scale, const int* min) {
  uint8_t b[12] = {};
  for (int s = 0; s < 4; ++s) {
    b[s] |= scale[s] & 63;
    b[s + 4] |= min[s] & 63;
  }
  for (int s = 4; s < 8; ++s) {
    b[s + 4] = static_cast<uint8_t>((scale[s] & 15) | ((min[s] & 15) << 4));
    b[s - 4] |= static_cast<uint8_t>((scale[s] >> 4) << 6);
    b[s] |= static_cast<uint8_t>((min[s] >> 4) << 6);
  }
  return std::string(reinterpret_cast<char*>(b), 12);
}

TEST(GgufQuants, Q4_K) {
  // Scales and mins use all six bits (values >= 16 exercise the high-bit packing).
  const int scale[8] = {1, 2, 63, 17, 33, 48, 5, 60};
  const int min[8] = {0, 62, 3, 16, 47, 1, 32, 63};
  int q[256];
  for (int e = 0; e < 256; ++e) q[e] = (e * 11 + 5) % 16;
  std::string b(4, '\0');
  PutF16(&b, 0, 0.5f);   // d
  PutF16(&b, 2, 0.25f);  // dmin
  b += PackScalesK4(scale, min);
  // 4 chunks of 32 bytes; chunk c holds sub-block 2c in low nibbles, 2c + 1 in high ones.
  std::string qs(128, '\0');
  for (int e = 0; e < 256; ++e) {
    const int sub = e / 32, l = e % 32;
    qs[32 * (sub / 2) + l] =
        static_cast<char>(qs[32 * (sub / 2) + l] | (q[e] << (sub % 2 ? 4 : 0)));
  }
  b += qs;
  ASSERT_EQ(b.size(), 144u);
  const auto y = Dequantize(GgmlType::kQ4_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    const int sub = e / 32;
    EXPECT_EQ(y[e], 0.5f * scale[sub] * q[e] - 0.25f * min[sub]) << e;
  }
}

TEST(GgufQuants, Q5_K) {
  const int scale[8] = {7, 63, 16, 1, 40, 31, 32, 2};
  const int min[8] = {5, 0, 63, 20, 17, 48, 2, 33};
  int q[256];
  for (int e = 0; e < 256; ++e) q[e] = (e * 13 + 7) % 32;
  std::string b(4, '\0');
  PutF16(&b, 0, 0.25f);
  PutF16(&b, 2, 0.5f);
  b += PackScalesK4(scale, min);
  // qh[l] bit s is the fifth bit of sub-block s's element l; the low four bits as in Q4_K.
  std::string qh(32, '\0'), qs(128, '\0');
  for (int e = 0; e < 256; ++e) {
    const int sub = e / 32, l = e % 32;
    qs[32 * (sub / 2) + l] =
        static_cast<char>(qs[32 * (sub / 2) + l] | ((q[e] & 15) << (sub % 2 ? 4 : 0)));
    qh[l] = static_cast<char>(qh[l] | ((q[e] >> 4) << sub));
  }
  b += qh + qs;
  ASSERT_EQ(b.size(), 176u);
  const auto y = Dequantize(GgmlType::kQ5_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    const int sub = e / 32;
    EXPECT_EQ(y[e], 0.25f * scale[sub] * q[e] - 0.5f * min[sub]) << e;
  }
}

TEST(GgufQuants, Q6_K) {
  int8_t scales[16];
  for (int s = 0; s < 16; ++s) scales[s] = static_cast<int8_t>(s % 2 ? -(s * 8) : s * 8 + 1);
  int q[256];  // 0..63, stored as is, meaning q - 32
  for (int e = 0; e < 256; ++e) q[e] = (e * 29 + 11) % 64;
  // Two halves of 128; in half h, element 32k + l has its low four bits in
  // ql[64h + l + 32 (k & 1)] (low nibble for k < 2, high for k >= 2) and its top two in bits
  // 2k, 2k + 1 of qh[32h + l]; its scale is scales[e / 16].
  std::string ql(128, '\0'), qh(64, '\0');
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    char& low = ql[64 * h + l + 32 * (k & 1)];
    low = static_cast<char>(low | ((q[e] & 15) << (k < 2 ? 0 : 4)));
    char& high = qh[32 * h + l];
    high = static_cast<char>(high | ((q[e] >> 4) << (2 * k)));
  }
  std::string b = ql + qh + std::string(reinterpret_cast<char*>(scales), 16) + std::string(2, '\0');
  PutF16(&b, 208, 0.0625f);
  ASSERT_EQ(b.size(), 210u);
  const auto y = Dequantize(GgmlType::kQ6_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(y[e], 0.0625f * scales[e / 16] * (q[e] - 32)) << e;
  }
}

TEST(GgufQuants, OtherTypesAreRefusedByName) {
  ExpectOneLineError(CheckDequantizable(GgmlType::kQ2_K), ErrorCode::kUnsupported,
                     {"Q2_K is not supported",
                      "supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, "
                      "Q4_K, Q5_K, Q6_K, IQ4_NL"});
  std::vector<float> out(256);
  std::string bytes(84, '\0');
  ExpectOneLineError(
      DequantizeToF32(GgmlType::kQ2_K,
                      std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), out),
      ErrorCode::kUnsupported, {"Q2_K"});
  for (GgmlType t :
       {GgmlType::kQ8_1, GgmlType::kIQ4_XS, GgmlType::kMXFP4, GgmlType::kI32, GgmlType::kF64}) {
    EXPECT_EQ(CheckDequantizable(t).code(), ErrorCode::kUnsupported);
  }
}

TEST(GgufQuants, SizeMismatchesAreErrors) {
  std::vector<float> out(32);
  std::string bytes(33, '\0');
  auto span = [](const std::string& s) {
    return std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  ExpectOneLineError(DequantizeToF32(GgmlType::kQ8_0, span(bytes), out),
                     ErrorCode::kInvalidArgument, {"34 bytes", "given 33"});
  std::vector<float> partial(16);
  ExpectOneLineError(DequantizeToF32(GgmlType::kQ8_0, span(bytes), partial),
                     ErrorCode::kInvalidArgument, {"16 elements", "32-element blocks"});
}

TEST(GgufQuants, DequantizeRowsOfATensor) {
  // A [3 rows x 32] Q8_0 tensor: row r has d = r + 1, q[j] = j.
  test::GgufWriter w;
  std::string data(3 * 34, '\0');
  for (int r = 0; r < 3; ++r) {
    PutF16(&data, 34 * r, static_cast<float>(r + 1));
    for (int j = 0; j < 32; ++j) data[34 * r + 2 + j] = static_cast<char>(j);
  }
  w.AddTensor("t", GgmlType::kQ8_0, {32, 3}, data);
  const std::string file = w.Build();
  auto f = GgufFile::Parse("t.gguf",
                           std::span(reinterpret_cast<const uint8_t*>(file.data()), file.size()));
  ASSERT_TRUE(f) << f.status().ToString();
  const GgufTensor& t = *f->FindTensor("t");
  std::vector<float> rows(64);
  ASSERT_TRUE(DequantizeRows(t, 1, 2, rows).ok());
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(rows[j], 2.0f * j);
    EXPECT_EQ(rows[32 + j], 3.0f * j);
  }
  ExpectOneLineError(DequantizeRows(t, 2, 2, rows), ErrorCode::kOutOfRange, {"'t'", "3 rows"});
  std::vector<float> wrong(10);
  ExpectOneLineError(DequantizeRows(t, 0, 1, wrong), ErrorCode::kInvalidArgument, {"given 10"});
}

}  // namespace
}  // namespace tessera
