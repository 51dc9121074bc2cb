// GGUF reader: header, metadata of every value type, typed accessors, tensor infos and data.
#include "format/gguf.h"

#include <gtest/gtest.h>

#include <cmath>

#include "format_test_util.h"
#include "support/gguf_writer.h"
#include "test_support.h"

namespace tessera {
namespace {

using test::ExpectOneLineError;
using test::F32Bytes;
using test::GgufWriter;

Expected<GgufFile> ParseString(const std::string& bytes) {
  return GgufFile::Parse("t.gguf",
                         std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

GgufWriter EveryValueType() {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddU8("v.u8", 200);
  w.AddI8("v.i8", -5);
  w.AddU16("v.u16", 60000);
  w.AddI16("v.i16", -30000);
  w.AddU32("v.u32", 4000000000u);
  w.AddI32("v.i32", -7);
  w.AddF32("v.f32", 1.5f);
  w.AddBool("v.bool", true);
  w.AddU64("v.u64", 1ull << 40);
  w.AddI64("v.i64", -(1ll << 40));
  w.AddF64("v.f64", 0.25);
  w.AddStringArray("v.strings", {"a", "", "héllo"});
  w.AddF32Array("v.floats", {0.5f, -2.0f});
  w.AddI32Array("v.ints", {1, -2, 3});
  return w;
}

TEST(Gguf, ReadsEveryValueType) {
  const std::string bytes = EveryValueType().Build();
  auto f = ParseString(bytes);
  ASSERT_TRUE(f) << f.status().ToString();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->metadata().size(), 15u);
  EXPECT_EQ(f->metadata()[1].first, "v.u8");  // file order kept
  EXPECT_EQ(*f->GetString("general.architecture"), "llama");
  EXPECT_EQ(*f->GetU32("v.u8"), 200u);
  EXPECT_EQ(*f->GetI32("v.i8"), -5);
  EXPECT_EQ(*f->GetU32("v.u16"), 60000u);
  EXPECT_EQ(*f->GetI32("v.i16"), -30000);
  EXPECT_EQ(*f->GetU32("v.u32"), 4000000000u);
  EXPECT_EQ(*f->GetI32("v.i32"), -7);
  EXPECT_EQ(*f->GetF32("v.f32"), 1.5f);
  EXPECT_EQ(*f->GetBool("v.bool"), true);
  EXPECT_EQ(*f->GetU64("v.u64"), 1ull << 40);
  EXPECT_EQ(*f->GetF32("v.f64"), 0.25f);
  auto strings = f->GetStringArray("v.strings");
  ASSERT_TRUE(strings);
  ASSERT_EQ(strings->size(), 3u);
  EXPECT_EQ((*strings)[0], "a");
  EXPECT_EQ((*strings)[1], "");
  EXPECT_EQ((*strings)[2], "héllo");
  EXPECT_EQ(*f->GetF32Array("v.floats"), (std::vector<float>{0.5f, -2.0f}));
  EXPECT_EQ(*f->GetI32Array("v.ints"), (std::vector<int32_t>{1, -2, 3}));
  auto array = f->GetArray("v.ints");
  ASSERT_TRUE(array);
  EXPECT_EQ((*array)->item_type, GgufValueType::kI32);
  EXPECT_EQ((*array)->item_count, 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_TRUE(f->tensors().empty());
}

TEST(Gguf, AccessorErrorsNameTheKeyAndWhatWasFound) {
  const std::string bytes = EveryValueType().Build();
  auto f = ParseString(bytes);
  ASSERT_TRUE(f);
  ExpectOneLineError(f->GetString("nope").status(), ErrorCode::kNotFound,
                     {"t.gguf", "'nope'", "missing"});
  ExpectOneLineError(f->GetU32("general.architecture").status(), ErrorCode::kCorrupt,
                     {"'general.architecture'", "string 'llama'"});
  ExpectOneLineError(f->GetU32("v.i32").status(), ErrorCode::kCorrupt, {"'v.i32'", "i32 -7"});
  ExpectOneLineError(f->GetI32("v.u32").status(), ErrorCode::kCorrupt, {"u32 4000000000"});
  ExpectOneLineError(f->GetU32("v.i64").status(), ErrorCode::kCorrupt, {"i64 -1099511627776"});
  ExpectOneLineError(f->GetF32("v.u8").status(), ErrorCode::kCorrupt, {"float", "u8 200"});
  ExpectOneLineError(f->GetBool("v.f32").status(), ErrorCode::kCorrupt, {"bool", "f32 1.5"});
  ExpectOneLineError(f->GetStringArray("v.ints").status(), ErrorCode::kCorrupt,
                     {"array of strings", "array of 3 i32"});
  ExpectOneLineError(f->GetF32Array("v.strings").status(), ErrorCode::kCorrupt,
                     {"array of 3 string"});
  ExpectOneLineError(f->GetI32Array("v.floats").status(), ErrorCode::kCorrupt, {"2 f32"});
  ExpectOneLineError(f->GetArray("v.u8").status(), ErrorCode::kCorrupt, {"an array", "u8 200"});
}

TEST(Gguf, ReadsTensorsInPlace) {
  GgufWriter w(2);
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  const std::vector<float> b = {7, 8};
  w.AddTensor("a.weight", GgmlType::kF32, {3, 2}, F32Bytes(a));
  w.AddTensor("b", GgmlType::kF32, {2}, F32Bytes(b));
  w.AddTensor("q", GgmlType::kQ8_0, {64, 3}, std::string(3 * 2 * 34, '\x01'));
  const std::string bytes = w.Build();
  auto f = ParseString(bytes);
  ASSERT_TRUE(f) << f.status().ToString();
  EXPECT_EQ(f->version(), 2u);
  ASSERT_EQ(f->tensors().size(), 3u);
  const GgufTensor* t = f->FindTensor("a.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dims, (std::vector<uint64_t>{3, 2}));
  EXPECT_EQ(t->num_elements, 6u);
  EXPECT_EQ(t->rows(), 2u);
  EXPECT_EQ(t->offset, 0u);
  ASSERT_EQ(t->data.size(), 24u);
  EXPECT_EQ(std::memcmp(t->data.data(), a.data(), 24), 0);
  EXPECT_EQ(f->data_offset() % 32, 0u);
  EXPECT_EQ(t->data.data(), reinterpret_cast<const uint8_t*>(bytes.data()) + f->data_offset());
  EXPECT_EQ(f->FindTensor("b")->offset, 32u);
  const GgufTensor* q = f->FindTensor("q");
  EXPECT_EQ(q->type, GgmlType::kQ8_0);
  EXPECT_EQ(q->data.size(), 204u);
  EXPECT_EQ(f->FindTensor("nope"), nullptr);
}

TEST(Gguf, HonoursGeneralAlignment) {
  GgufWriter w;
  w.AddU32("general.alignment", 64);
  w.SetAlignment(64);
  w.AddTensor("a", GgmlType::kF32, {3}, std::string(12, '\0'));
  w.AddTensor("b", GgmlType::kF32, {3}, std::string(12, '\0'));
  const std::string bytes = w.Build();
  auto f = ParseString(bytes);
  ASSERT_TRUE(f) << f.status().ToString();
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  EXPECT_EQ(f->FindTensor("b")->offset, 64u);
}

TEST(Gguf, OpensAFileAndKeepsItMapped) {
  test::TempDir tmp;
  GgufWriter w;
  w.AddString("general.name", "x");
  const std::vector<float> v = {0.5f, 1.5f};
  w.AddTensor("w", GgmlType::kF32, {2}, F32Bytes(v));
  test::WriteFile(tmp.File("m.gguf"), w.Build());
  auto f = GgufFile::Open(tmp.File("m.gguf"));
  ASSERT_TRUE(f) << f.status().ToString();
  GgufFile moved = std::move(*f);
  float x[2];
  std::memcpy(x, moved.FindTensor("w")->data.data(), 8);
  EXPECT_EQ(x[1], 1.5f);
  EXPECT_EQ(*moved.GetString("general.name"), "x");
  ExpectOneLineError(GgufFile::Open(tmp.File("absent.gguf")).status(), ErrorCode::kNotFound,
                     {"absent.gguf"});
}

TEST(GgmlType, TableCoversEveryTypeWithGgmlGeometry) {
  EXPECT_EQ(FindGgmlType(4), nullptr);  // removed Q4_2
  EXPECT_EQ(FindGgmlType(31), nullptr);
  EXPECT_EQ(FindGgmlType(1000), nullptr);
  for (uint32_t id = 0; id < 64; ++id) {
    const GgmlTypeTraits* t = FindGgmlType(id);
    if (t) {
      EXPECT_EQ(static_cast<uint32_t>(t->type), id);
    }
  }
  // The sizes ggml static_asserts, for the types tessera reads.
  EXPECT_EQ(GgmlTraits(GgmlType::kQ8_0).block_bytes, 34u);
  EXPECT_EQ(GgmlTraits(GgmlType::kQ4_0).block_bytes, 18u);
  EXPECT_EQ(GgmlTraits(GgmlType::kQ4_1).block_bytes, 20u);
  EXPECT_EQ(GgmlTraits(GgmlType::kQ4_K).block_bytes, 144u);
  EXPECT_EQ(GgmlTraits(GgmlType::kQ5_K).block_bytes, 176u);
  EXPECT_EQ(GgmlTraits(GgmlType::kQ6_K).block_bytes, 210u);
  EXPECT_EQ(GgmlTraits(GgmlType::kIQ4_NL).block_bytes, 18u);
  EXPECT_EQ(GgmlTraits(GgmlType::kQ2_K).block_bytes, 84u);
  EXPECT_EQ(GgmlTraits(GgmlType::kQ3_K).block_bytes, 110u);
  EXPECT_EQ(GgmlTraits(GgmlType::kIQ4_XS).block_bytes, 136u);
  EXPECT_EQ(GgmlTypeName(GgmlType::kBF16), "BF16");
}

TEST(GgmlType, RowBytesNeedWholeBlocks) {
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kQ4_K, 512), 288u);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kQ8_0, 32), 34u);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kF16, 3), 6u);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kQ6_K, 0), 0u);
  ExpectOneLineError(GgmlRowBytes(GgmlType::kQ4_K, 255).status(), ErrorCode::kCorrupt,
                     {"255", "Q4_K", "256-element blocks"});
  ExpectOneLineError(GgmlRowBytes(GgmlType::kQ8_0, 48).status(), ErrorCode::kCorrupt, {"Q8_0"});
  ExpectOneLineError(GgmlRowBytes(GgmlType::kF64, ~uint64_t{0}).status(), ErrorCode::kCorrupt,
                     {"overflow"});
}

}  // namespace
}  // namespace tessera
