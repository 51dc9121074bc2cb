// Well-formed safetensors: dtypes, writing and reading back, the real stories260k checkpoint
// and sharded checkpoints.
#include "format/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "format_test_util.h"
#include "test_support.h"

namespace tessera {
namespace {

using test::ReadFile;
using test::TempDir;
using test::WriteFile;

TEST(DType, ParsesEverySafetensorsName) {
  struct Case {
    const char* name;
    DType dtype;
    size_t size;
  };
  const Case cases[] = {{"F64", DType::kF64, 8},   {"F32", DType::kF32, 4}, {"F16", DType::kF16, 2},
                        {"BF16", DType::kBF16, 2}, {"I64", DType::kI64, 8}, {"I32", DType::kI32, 4},
                        {"I16", DType::kI16, 2},   {"I8", DType::kI8, 1},   {"U8", DType::kU8, 1},
                        {"BOOL", DType::kBool, 1}};
  for (const Case& c : cases) {
    auto parsed = ParseSafetensorsDType(c.name);
    ASSERT_TRUE(parsed) << c.name;
    EXPECT_EQ(*parsed, c.dtype);
    EXPECT_EQ(DTypeName(c.dtype), c.name);
    EXPECT_EQ(DTypeSize(c.dtype), c.size);
  }
  EXPECT_TRUE(IsFloatWeightDType(DType::kBF16));
  EXPECT_TRUE(IsFloatWeightDType(DType::kF16));
  EXPECT_TRUE(IsFloatWeightDType(DType::kF32));
  EXPECT_FALSE(IsFloatWeightDType(DType::kF64));
  EXPECT_FALSE(IsFloatWeightDType(DType::kI32));
}

TEST(DType, RefusesUnknownNamesListingSupported) {
  auto fp8 = ParseSafetensorsDType("F8_E4M3");
  ASSERT_FALSE(fp8);
  EXPECT_EQ(fp8.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(fp8.status().message().find("F8_E4M3"), std::string::npos);
  EXPECT_NE(fp8.status().message().find("BF16"), std::string::npos);
  EXPECT_FALSE(ParseSafetensorsDType("f32"));  // case matters
  EXPECT_FALSE(ParseSafetensorsDType(""));
}

std::vector<float> ReadF32(const TensorInfo& t) {
  std::vector<float> out(t.num_elements);
  Status s = CopyTensorToF32(t, out);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

TEST(Safetensors, RoundTripsF32F16Bf16) {
  TempDir tmp;
  const std::string path = tmp.File("rt.safetensors");
  // F32 keeps everything; the 16-bit cases use values whose rounding is worked out by hand.
  const std::vector<float> f32 = {1.0f, -2.5f, 3.14159274f, 1e-30f, -0.0f, 123456.789f};
  // F16: 65504 is the largest finite half, 2^-24 the smallest subnormal, 1/3 rounds to
  // 0x3555 = 0.333251953125, 1 + 2^-11 is a tie that rounds to the even 1.0.
  const std::vector<float> f16 = {65504.0f, 5.9604644775390625e-08f, 1.0f / 3.0f, 1.00048828125f};
  const std::vector<float> f16_expected = {65504.0f, 5.9604644775390625e-08f, 0.333251953125f,
                                           1.0f};
  // BF16 keeps 8 significant bits: 3.140625 is exact; 1 + 2^-8 ties to even 1.0;
  // 1 + 3*2^-8 ties to even 1.015625; -0.5 exact.
  const std::vector<float> bf16 = {3.140625f, 1.00390625f, 1.01171875f, -0.5f};
  const std::vector<float> bf16_expected = {3.140625f, 1.0f, 1.015625f, -0.5f};

  std::vector<TensorToWrite> tensors;
  tensors.push_back(MakeTensor("a.f32", DType::kF32, {2, 3}, f32));
  tensors.push_back(MakeTensor("b.f16", DType::kF16, {4}, f16));
  tensors.push_back(MakeTensor("c.bf16", DType::kBF16, {2, 2}, bf16));
  ASSERT_TRUE(WriteSafetensors(path, tensors, {{"format", "pt"}}).ok());

  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file) << file.status().message();
  ASSERT_EQ(file->tensors().size(), 3u);
  EXPECT_EQ(file->metadata().at("format"), "pt");

  const TensorInfo* a = file->Find("a.f32");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::kF32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->num_elements, 6u);
  EXPECT_EQ(a->data.size(), 24u);
  EXPECT_EQ(a->file, path);
  std::vector<float> got = ReadF32(*a);
  for (size_t i = 0; i < f32.size(); ++i) {
    EXPECT_EQ(std::memcmp(&got[i], &f32[i], 4), 0) << i;  // bit-exact, keeps -0.0
  }

  const TensorInfo* b = file->Find("b.f16");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kF16);
  EXPECT_EQ(ReadF32(*b), f16_expected);
  // The raw bits of 1/3 in half precision are 0x3555, stored little-endian.
  EXPECT_EQ(b->data[4], 0x55);
  EXPECT_EQ(b->data[5], 0x35);

  const TensorInfo* c = file->Find("c.bf16");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->dtype, DType::kBF16);
  EXPECT_EQ(c->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(ReadF32(*c), bf16_expected);
  EXPECT_EQ(c->data[0], 0x49);  // 3.140625 = 0x4049
  EXPECT_EQ(c->data[1], 0x40);

  EXPECT_EQ(file->Find("missing"), nullptr);
}

TEST(Safetensors, WriterAlignsHeaderAndTensorsTo8Bytes) {
  TempDir tmp;
  const std::string path = tmp.File("align.safetensors");
  const float three[] = {1, 2, 3};
  std::vector<TensorToWrite> tensors;
  tensors.push_back(MakeTensor("odd", DType::kF16, {3}, three));  // 6 bytes, so padding follows
  tensors.push_back(MakeTensor("next", DType::kF32, {3}, three));
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  std::string bytes = ReadFile(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file) << file.status().message();
  const uint8_t* base = file->Find("odd")->data.data() - 8 - n;
  EXPECT_EQ((file->Find("odd")->data.data() - base) % 8, 0);
  EXPECT_EQ((file->Find("next")->data.data() - base) % 8, 0);
  EXPECT_EQ(ReadF32(*file->Find("next")), (std::vector<float>{1, 2, 3}));
}

TEST(Safetensors, ScalarsAndEmptyTensors) {
  TempDir tmp;
  const std::string path = tmp.File("edge.safetensors");
  const float one[] = {7.0f};
  std::vector<TensorToWrite> tensors;
  tensors.push_back(MakeTensor("scalar", DType::kF32, {}, one));
  tensors.push_back(MakeTensor("empty", DType::kBF16, {0, 4}, {}));
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->Find("scalar")->num_elements, 1u);
  EXPECT_TRUE(file->Find("scalar")->shape.empty());
  EXPECT_EQ(ReadF32(*file->Find("scalar")), std::vector<float>{7.0f});
  EXPECT_EQ(file->Find("empty")->num_elements, 0u);
  EXPECT_EQ(file->Find("empty")->data.size(), 0u);
}

TEST(Safetensors, TensorsAreSortedByNameAndSurviveMoves) {
  TempDir tmp;
  const std::string path = tmp.File("sorted.safetensors");
  const float v[] = {1, 2};
  std::vector<TensorToWrite> tensors;
  tensors.push_back(MakeTensor("zeta", DType::kF32, {2}, v));
  tensors.push_back(MakeTensor("alpha", DType::kF32, {2}, v));
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  auto opened = SafetensorsFile::Open(path);
  ASSERT_TRUE(opened);
  SafetensorsFile moved = std::move(opened).value();
  ASSERT_EQ(moved.tensors().size(), 2u);
  EXPECT_EQ(moved.tensors()[0].name, "alpha");
  EXPECT_EQ(moved.tensors()[1].name, "zeta");
  EXPECT_EQ(ReadF32(*moved.Find("zeta")), (std::vector<float>{1, 2}));
}

TEST(Safetensors, WriterRefusesInconsistentTensors) {
  TempDir tmp;
  const float v[] = {1, 2, 3};
  std::vector<TensorToWrite> wrong_count;
  wrong_count.push_back(MakeTensor("w", DType::kF32, {2, 2}, v));
  Status s = WriteSafetensors(tmp.File("a.safetensors"), wrong_count);
  test::ExpectOneLineError(s, ErrorCode::kInvalidArgument, {"'w'", "[2, 2]"});

  std::vector<TensorToWrite> twice;
  twice.push_back(MakeTensor("w", DType::kF32, {3}, v));
  twice.push_back(MakeTensor("w", DType::kF32, {3}, v));
  test::ExpectOneLineError(WriteSafetensors(tmp.File("b.safetensors"), twice),
                           ErrorCode::kInvalidArgument, {"twice"});

  std::vector<TensorToWrite> ints;
  ints.push_back(MakeTensor("i", DType::kI32, {3}, v));  // MakeTensor packs floats only
  EXPECT_FALSE(WriteSafetensors(tmp.File("c.safetensors"), ints).ok());

  std::vector<TensorToWrite> ok;
  ok.push_back(MakeTensor("w", DType::kF32, {3}, v));
  Status io = WriteSafetensors(tmp.File("no/such/dir/x.safetensors"), ok);
  test::ExpectOneLineError(io, ErrorCode::kIo, {"no/such/dir"});
}

TEST(CopyTensorToF32, ChecksOutputSizeAndDtype) {
  TempDir tmp;
  const std::string path = tmp.File("x.safetensors");
  const float v[] = {1, 2, 3, 4};
  std::vector<TensorToWrite> tensors;
  tensors.push_back(MakeTensor("w", DType::kF32, {4}, v));
  TensorToWrite ints;
  ints.name = "ids";
  ints.dtype = DType::kI32;
  ints.shape = {1};
  ints.bytes = {1, 0, 0, 0};
  tensors.push_back(ints);
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file);
  std::vector<float> small(3);
  test::ExpectOneLineError(CopyTensorToF32(*file->Find("w"), small), ErrorCode::kInvalidArgument,
                           {"'w'", "3", "4"});
  std::vector<float> one(1);
  test::ExpectOneLineError(CopyTensorToF32(*file->Find("ids"), one), ErrorCode::kUnsupported,
                           {"I32"});
}

const std::string& StoriesDir() {
  static const std::string dir = test::SharedDir() + "/models/stories260k";
  return dir;
}

TEST(Safetensors, ReadsRealStories260k) {
  auto file = SafetensorsFile::Open(StoriesDir() + "/model.safetensors");
  ASSERT_TRUE(file) << file.status().message();
  ASSERT_EQ(file->tensors().size(), 47u);  // SOURCE.md: 47 float32 tensors
  uint64_t parameters = 0;
  for (const TensorInfo& t : file->tensors()) {
    EXPECT_EQ(t.dtype, DType::kF32) << t.name;
    parameters += t.num_elements;
  }
  EXPECT_EQ(parameters, 260032u);  // SOURCE.md: 260,032 parameters
  EXPECT_EQ(file->metadata().at("format"), "pt");

  // Shapes follow config.json: hidden 64, intermediate 172, 8 heads, 4 KV heads of dim 8.
  struct Expect {
    const char* name;
    std::vector<int64_t> shape;
  };
  const Expect expects[] = {
      {"model.embed_tokens.weight", {512, 64}},
      {"model.norm.weight", {64}},
      {"model.layers.0.self_attn.q_proj.weight", {64, 64}},
      {"model.layers.0.self_attn.k_proj.weight", {32, 64}},
      {"model.layers.4.self_attn.v_proj.weight", {32, 64}},
      {"model.layers.4.self_attn.o_proj.weight", {64, 64}},
      {"model.layers.2.mlp.gate_proj.weight", {172, 64}},
      {"model.layers.2.mlp.down_proj.weight", {64, 172}},
      {"model.layers.3.input_layernorm.weight", {64}},
  };
  for (const Expect& e : expects) {
    const TensorInfo* t = file->Find(e.name);
    ASSERT_NE(t, nullptr) << e.name;
    EXPECT_EQ(t->shape, e.shape) << e.name;
  }
  EXPECT_EQ(file->Find("lm_head.weight"), nullptr);  // tied to the embedding

  std::vector<float> norm = ReadF32(*file->Find("model.norm.weight"));
  for (float x : norm) EXPECT_TRUE(std::isfinite(x));
  EXPECT_GT(std::accumulate(norm.begin(), norm.end(), 0.0), 0.0);  // trained RMSNorm gains
}

TEST(CheckpointTensors, OpensSingleFileDirectory) {
  auto ckpt = CheckpointTensors::Open(StoriesDir());
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  EXPECT_EQ(ckpt->size(), 47u);
  EXPECT_EQ(ckpt->Names().size(), 47u);
  EXPECT_EQ(ckpt->Names().front(), "model.embed_tokens.weight");
  ASSERT_NE(ckpt->Find("model.norm.weight"), nullptr);
  EXPECT_EQ(ckpt->Find("model.norm.weight")->shape, (std::vector<int64_t>{64}));
}

// Two shards and an index, as transformers' save_pretrained writes them.
void WriteShardedCheckpoint(const std::string& dir) {
  const float a[] = {1, 2, 3, 4};
  const float b[] = {-1, -2};
  const float c[] = {0.5f};
  std::vector<TensorToWrite> shard1;
  shard1.push_back(MakeTensor("model.a", DType::kF32, {2, 2}, a));
  shard1.push_back(MakeTensor("model.b", DType::kBF16, {2}, b));
  std::vector<TensorToWrite> shard2;
  shard2.push_back(MakeTensor("model.c", DType::kF16, {1}, c));
  ASSERT_TRUE(WriteSafetensors(dir + "/model-00001-of-00002.safetensors", shard1).ok());
  ASSERT_TRUE(WriteSafetensors(dir + "/model-00002-of-00002.safetensors", shard2).ok());
  WriteFile(dir + "/model.safetensors.index.json", R"({
    "metadata": {"total_size": 22},
    "weight_map": {
      "model.a": "model-00001-of-00002.safetensors",
      "model.b": "model-00001-of-00002.safetensors",
      "model.c": "model-00002-of-00002.safetensors"
    }
  })");
}

TEST(CheckpointTensors, OpensShardedCheckpoint) {
  TempDir tmp;
  WriteShardedCheckpoint(tmp.path());
  auto ckpt = CheckpointTensors::Open(tmp.path());
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  EXPECT_EQ(ckpt->size(), 3u);
  EXPECT_EQ(ckpt->Names(), (std::vector<std::string>{"model.a", "model.b", "model.c"}));
  EXPECT_EQ(ReadF32(*ckpt->Find("model.a")), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(ReadF32(*ckpt->Find("model.b")), (std::vector<float>{-1, -2}));
  EXPECT_EQ(ReadF32(*ckpt->Find("model.c")), (std::vector<float>{0.5f}));
  EXPECT_NE(ckpt->Find("model.c")->file.find("model-00002-of-00002"), std::string::npos);
  EXPECT_EQ(ckpt->Find("model.d"), nullptr);

  // Moving the whole checkpoint keeps the lookup table valid.
  CheckpointTensors moved = std::move(ckpt).value();
  EXPECT_EQ(ReadF32(*moved.Find("model.a")), (std::vector<float>{1, 2, 3, 4}));
}

TEST(CheckpointTensors, PrefersSingleFileOverIndex) {
  TempDir tmp;
  WriteShardedCheckpoint(tmp.path());
  const float v[] = {9};
  std::vector<TensorToWrite> single;
  single.push_back(MakeTensor("only", DType::kF32, {1}, v));
  ASSERT_TRUE(WriteSafetensors(tmp.File("model.safetensors"), single).ok());
  auto ckpt = CheckpointTensors::Open(tmp.path() + "/");
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  EXPECT_EQ(ckpt->Names(), std::vector<std::string>{"only"});
}

}  // namespace
}  // namespace tessera
