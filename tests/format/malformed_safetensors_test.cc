// Malformed safetensors files and checkpoint indexes: each must give a one-line error naming
// the problem, and never crash (this suite also runs under ASan+UBSan).
#include <gtest/gtest.h>

#include "format/json_util.h"
#include "format/safetensors.h"
#include "format_test_util.h"
#include "test_support.h"

namespace tessera {
namespace {

using test::ExpectOneLineError;
using test::LengthPrefix;
using test::RawSafetensors;
using test::TempDir;
using test::WriteFile;

// Writes `bytes` as a .safetensors file and opens it.
Status OpenBytes(const std::string& bytes) {
  TempDir tmp;
  const std::string path = tmp.File("bad.safetensors");
  WriteFile(path, bytes);
  auto file = SafetensorsFile::Open(path);
  return file.status();
}

std::string OneTensorHeader(const std::string& dtype, const std::string& shape,
                            const std::string& offsets) {
  return R"({"w": {"dtype": ")" + dtype + R"(", "shape": )" + shape + R"(, "data_offsets": )" +
         offsets + "}}";
}

TEST(MalformedSafetensors, ControlCaseOpens) {
  // The helper itself produces a readable file, so the failures below are the defects.
  EXPECT_TRUE(OpenBytes(RawSafetensors(OneTensorHeader("F32", "[2]", "[0, 8]"), 8)).ok());
}

TEST(MalformedSafetensors, EmptyAndTruncatedLength) {
  ExpectOneLineError(OpenBytes(""), ErrorCode::kCorrupt, {"0 bytes", "too short"});
  ExpectOneLineError(OpenBytes(std::string("\x10\x00\x00", 3)), ErrorCode::kCorrupt, {"3 bytes"});
}

TEST(MalformedSafetensors, TruncatedDataSection) {
  // A valid header promising 8 bytes of data, with only 4 present.
  ExpectOneLineError(OpenBytes(RawSafetensors(OneTensorHeader("F32", "[2]", "[0, 8]"), 4)),
                     ErrorCode::kCorrupt, {"'w'", "[0, 8]", "past the end"});
}

TEST(MalformedSafetensors, HeaderLengthPastEndOfFile) {
  ExpectOneLineError(OpenBytes(LengthPrefix(1000) + "{}"), ErrorCode::kCorrupt,
                     {"header length 1000", "past the end"});
}

TEST(MalformedSafetensors, AbsurdHeaderLength) {
  ExpectOneLineError(OpenBytes(LengthPrefix(0xFFFFFFFFFFFFFFF0ull) + "{}"), ErrorCode::kCorrupt,
                     {"header length", "limit"});
}

TEST(MalformedSafetensors, HeaderNotJson) {
  ExpectOneLineError(OpenBytes(RawSafetensors("{\"w\": {\"dtype\": ", 0)), ErrorCode::kCorrupt,
                     {"invalid JSON at byte"});
  ExpectOneLineError(OpenBytes(RawSafetensors("", 0)), ErrorCode::kCorrupt, {"invalid JSON"});
}

TEST(MalformedSafetensors, HeaderNotAnObject) {
  ExpectOneLineError(OpenBytes(RawSafetensors("[1, 2, 3]", 0)), ErrorCode::kCorrupt,
                     {"JSON object", "array"});
  ExpectOneLineError(OpenBytes(RawSafetensors(R"({"w": 5})", 0)), ErrorCode::kCorrupt,
                     {"'w'", "entry must be an object"});
}

TEST(MalformedSafetensors, InvalidUtf8InHeader) {
  std::string header = OneTensorHeader("F32", "[2]", "[0, 8]");
  header.insert(3, "\xff\xfe");  // inside the tensor name
  ExpectOneLineError(OpenBytes(RawSafetensors(header, 8)), ErrorCode::kCorrupt,
                     {"invalid UTF-8", "byte 3"});
}

TEST(MalformedSafetensors, DeepNesting) {
  // A megabyte of '[' would overflow a recursive parser's stack; we refuse it up front.
  std::string header = "{\"w\": " + std::string(1 << 20, '[');
  ExpectOneLineError(OpenBytes(RawSafetensors(header, 0)), ErrorCode::kCorrupt,
                     {"nests deeper than"});
}

TEST(MalformedSafetensors, UnknownDtype) {
  ExpectOneLineError(OpenBytes(RawSafetensors(OneTensorHeader("F8_E4M3", "[2]", "[0, 2]"), 2)),
                     ErrorCode::kUnsupported, {"'w'", "F8_E4M3", "supported"});
  ExpectOneLineError(
      OpenBytes(RawSafetensors(R"({"w": {"dtype": 7, "shape": [1], "data_offsets": [0, 4]}})", 4)),
      ErrorCode::kCorrupt, {"dtype must be a string"});
}

TEST(MalformedSafetensors, BadShapes) {
  ExpectOneLineError(OpenBytes(RawSafetensors(OneTensorHeader("F32", "[-1, 2]", "[0, 8]"), 8)),
                     ErrorCode::kCorrupt, {"'w'", "shape"});
  ExpectOneLineError(OpenBytes(RawSafetensors(OneTensorHeader("F32", "[1.5]", "[0, 4]"), 4)),
                     ErrorCode::kCorrupt, {"shape"});
  ExpectOneLineError(OpenBytes(RawSafetensors(OneTensorHeader("F32", "\"2\"", "[0, 8]"), 8)),
                     ErrorCode::kCorrupt, {"shape"});
  // 2^32 * 2^32 elements overflows 64 bits.
  ExpectOneLineError(
      OpenBytes(RawSafetensors(OneTensorHeader("F32", "[4294967296, 4294967296]", "[0, 8]"), 8)),
      ErrorCode::kCorrupt, {"overflow"});
  // 2^62 elements fit, but not their 4-byte size.
  ExpectOneLineError(
      OpenBytes(RawSafetensors(OneTensorHeader("F32", "[4611686018427387904]", "[0, 8]"), 8)),
      ErrorCode::kCorrupt, {"overflow"});
}

TEST(MalformedSafetensors, BadOffsets) {
  ExpectOneLineError(OpenBytes(RawSafetensors(OneTensorHeader("F32", "[2]", "[0]"), 8)),
                     ErrorCode::kCorrupt, {"data_offsets must be [begin, end]"});
  ExpectOneLineError(OpenBytes(RawSafetensors(OneTensorHeader("F32", "[2]", "[0, 4, 8]"), 8)),
                     ErrorCode::kCorrupt, {"data_offsets"});
  ExpectOneLineError(OpenBytes(RawSafetensors(OneTensorHeader("F32", "[2]", "[-8, 0]"), 8)),
                     ErrorCode::kCorrupt, {"data_offsets"});
  ExpectOneLineError(OpenBytes(RawSafetensors(OneTensorHeader("F32", "[2]", "[8, 0]"), 8)),
                     ErrorCode::kCorrupt, {"begin after end"});
  ExpectOneLineError(OpenBytes(RawSafetensors(OneTensorHeader("F32", "[2]", "[0, \"8\"]"), 8)),
                     ErrorCode::kCorrupt, {"data_offsets"});
  ExpectOneLineError(OpenBytes(RawSafetensors(R"({"w": {"dtype": "F32", "shape": [2]}})", 8)),
                     ErrorCode::kCorrupt, {"data_offsets", "missing"});
}

TEST(MalformedSafetensors, OutOfRangeOffsets) {
  ExpectOneLineError(OpenBytes(RawSafetensors(OneTensorHeader("F32", "[2]", "[8, 16]"), 8)),
                     ErrorCode::kCorrupt, {"[8, 16]", "past the end", "8 bytes"});
  // Huge offsets must not wrap around when added to the data start.
  ExpectOneLineError(
      OpenBytes(RawSafetensors(
          OneTensorHeader("F32", "[2]", "[9223372036854775800, 9223372036854775808]"), 8)),
      ErrorCode::kCorrupt, {"data_offsets"});
}

TEST(MalformedSafetensors, ElementCountMismatch) {
  ExpectOneLineError(OpenBytes(RawSafetensors(OneTensorHeader("F32", "[3]", "[0, 8]"), 12)),
                     ErrorCode::kCorrupt, {"'w'", "spans 8 bytes", "needs 12"});
}

TEST(MalformedSafetensors, OverlappingOffsets) {
  const std::string header =
      R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})";
  ExpectOneLineError(OpenBytes(RawSafetensors(header, 16)), ErrorCode::kCorrupt,
                     {"'a'", "'b'", "overlap"});
  // Identical ranges are an overlap too.
  const std::string same =
      R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
          "b": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}})";
  ExpectOneLineError(OpenBytes(RawSafetensors(same, 8)), ErrorCode::kCorrupt, {"overlap"});
}

TEST(MalformedSafetensors, DuplicateTensorNames) {
  const std::string header =
      R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
          "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})";
  ExpectOneLineError(OpenBytes(RawSafetensors(header, 8)), ErrorCode::kCorrupt, {"'w'", "twice"});
}

TEST(MalformedSafetensors, BadMetadata) {
  ExpectOneLineError(OpenBytes(RawSafetensors(R"({"__metadata__": {"format": 1}})", 0)),
                     ErrorCode::kCorrupt, {"__metadata__", "'format'", "string"});
  ExpectOneLineError(OpenBytes(RawSafetensors(R"({"__metadata__": [1]})", 0)), ErrorCode::kCorrupt,
                     {"__metadata__"});
}

TEST(MalformedSafetensors, ErrorsNameTheFile) {
  TempDir tmp;
  const std::string path = tmp.File("named.safetensors");
  WriteFile(path, "abc");
  auto file = SafetensorsFile::Open(path);
  ExpectOneLineError(file.status(), ErrorCode::kCorrupt, {"named.safetensors"});
  auto missing = SafetensorsFile::Open(tmp.File("missing.safetensors"));
  ExpectOneLineError(missing.status(), ErrorCode::kNotFound, {"missing.safetensors"});
}

TEST(MalformedSafetensors, EveryHeaderByteCorruptedIsHandled) {
  // Overwrites each byte of a real two-tensor file's length and header with a few hostile
  // values. Whatever the outcome, there is no crash (ASan/UBSan watch this) and every
  // error is one line; a file that still opens must still be self-consistent.
  TempDir tmp;
  const std::string good_path = tmp.File("good.safetensors");
  const float v[] = {1, 2, 3};
  std::vector<TensorToWrite> tensors;
  tensors.push_back(MakeTensor("a", DType::kF16, {3}, v));
  tensors.push_back(MakeTensor("b", DType::kF32, {1, 3}, v));
  ASSERT_TRUE(WriteSafetensors(good_path, tensors, {{"k", "v"}}).ok());
  const std::string good = test::ReadFile(good_path);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(good[i]);
  ASSERT_LT(8 + header_len, good.size());

  const std::string path = tmp.File("mutated.safetensors");
  int refused = 0;
  for (size_t pos = 0; pos < 8 + header_len; ++pos) {
    for (char replacement : {'\0', '\xff', '[', '"', '9', '-', '}'}) {
      if (good[pos] == replacement) continue;
      std::string bytes = good;
      bytes[pos] = replacement;
      WriteFile(path, bytes);
      auto file = SafetensorsFile::Open(path);
      if (!file) {
        ++refused;
        EXPECT_EQ(file.status().message().find('\n'), std::string::npos);
        continue;
      }
      for (const TensorInfo& t : file->tensors()) {
        EXPECT_EQ(t.data.size(), t.num_elements * DTypeSize(t.dtype)) << t.name;
      }
    }
  }
  EXPECT_GT(refused, 100);  // most corruptions must be caught
}

// A directory with one good shard and the given index text.
Status OpenIndexed(const std::string& index_json, bool add_second_shard = false) {
  TempDir tmp;
  const float v[] = {1, 2};
  std::vector<TensorToWrite> shard;
  shard.push_back(MakeTensor("a", DType::kF32, {2}, v));
  EXPECT_TRUE(WriteSafetensors(tmp.File("s1.safetensors"), shard).ok());
  if (add_second_shard) {
    // s2 holds "b" and, wrongly, a second copy of "a".
    shard.push_back(MakeTensor("b", DType::kF32, {2}, v));
    EXPECT_TRUE(WriteSafetensors(tmp.File("s2.safetensors"), shard).ok());
  }
  WriteFile(tmp.File("model.safetensors.index.json"), index_json);
  auto ckpt = CheckpointTensors::Open(tmp.path());
  return ckpt.status();
}

TEST(MalformedCheckpoint, ControlCaseOpens) {
  EXPECT_TRUE(OpenIndexed(R"({"weight_map": {"a": "s1.safetensors"}})").ok());
}

TEST(MalformedCheckpoint, IndexNamesMissingShard) {
  ExpectOneLineError(
      OpenIndexed(R"({"weight_map": {"a": "s1.safetensors", "b": "s9.safetensors"}})"),
      ErrorCode::kNotFound, {"'s9.safetensors'", "does not exist"});
}

TEST(MalformedCheckpoint, ShardNamesMustBePlainFileNames) {
  for (const char* shard :
       {"../s1.safetensors", "sub/s1.safetensors", "/etc/passwd", "..", "", "a\\\\b.safetensors"}) {
    std::string index = std::string(R"({"weight_map": {"a": ")") + shard + R"("}})";
    ExpectOneLineError(OpenIndexed(index), ErrorCode::kCorrupt, {"plain file names"});
  }
}

TEST(MalformedCheckpoint, IndexPromisesTensorShardLacks) {
  ExpectOneLineError(
      OpenIndexed(R"({"weight_map": {"a": "s1.safetensors", "zz": "s1.safetensors"}})"),
      ErrorCode::kCorrupt, {"'zz'", "does not have it"});
}

TEST(MalformedCheckpoint, TensorInTwoShards) {
  ExpectOneLineError(
      OpenIndexed(R"({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})",
                  /*add_second_shard=*/true),
      ErrorCode::kCorrupt, {"'a'", "both"});
}

TEST(MalformedCheckpoint, BadIndexDocuments) {
  ExpectOneLineError(OpenIndexed("not json"), ErrorCode::kCorrupt, {"index.json", "invalid JSON"});
  ExpectOneLineError(OpenIndexed("[]"), ErrorCode::kCorrupt, {"weight_map"});
  ExpectOneLineError(OpenIndexed(R"({"metadata": {}})"), ErrorCode::kCorrupt,
                     {"weight_map", "missing"});
  ExpectOneLineError(OpenIndexed(R"({"weight_map": {"a": 3}})"), ErrorCode::kCorrupt,
                     {"'a'", "string"});
  ExpectOneLineError(OpenIndexed(std::string(100000, '{')), ErrorCode::kCorrupt, {"nests deeper"});
}

TEST(MalformedCheckpoint, EmptyDirectoryNamesBothFiles) {
  TempDir tmp;
  auto ckpt = CheckpointTensors::Open(tmp.path());
  ExpectOneLineError(ckpt.status(), ErrorCode::kNotFound,
                     {"model.safetensors", "model.safetensors.index.json"});
}

TEST(MalformedCheckpoint, BadShardIsReportedWithItsPath) {
  TempDir tmp;
  WriteFile(tmp.File("s1.safetensors"), LengthPrefix(50) + "{}");
  WriteFile(tmp.File("model.safetensors.index.json"), R"({"weight_map": {"a": "s1.safetensors"}})");
  auto ckpt = CheckpointTensors::Open(tmp.path());
  ExpectOneLineError(ckpt.status(), ErrorCode::kCorrupt, {"s1.safetensors", "header length"});
}

TEST(MalformedJson, ReportsByteOffsetAndLine) {
  auto doc = ParseJsonDocument("{\n  \"a\": 1,,\n}", "x.json");
  ExpectOneLineError(doc.status(), ErrorCode::kCorrupt, {"x.json", "byte 11", "line 2"});
  auto trailing = ParseJsonDocument("{} {}", "x.json");
  ExpectOneLineError(trailing.status(), ErrorCode::kCorrupt, {"invalid JSON"});
  auto overflow = ParseJsonDocument("[1e999]", "x.json");
  ExpectOneLineError(overflow.status(), ErrorCode::kCorrupt, {"invalid JSON", "1e999"});
  auto lone_surrogate = ParseJsonDocument(R"(["\ud800"])", "x.json");
  ExpectOneLineError(lone_surrogate.status(), ErrorCode::kCorrupt, {"invalid JSON"});
  auto control = ParseJsonDocument("[\"a\nb\"]", "x.json");  // raw newline inside a string
  ExpectOneLineError(control.status(), ErrorCode::kCorrupt, {"invalid JSON"});
}

TEST(MalformedJson, TypedGettersNameTheField) {
  auto doc = ParseJsonDocument(
      R"({"neg": -3, "big": 18446744073709551615, "f": 1.5, "s": "x", "l": [1, "2"]})", "x.json");
  ASSERT_TRUE(doc);
  JsonObjectReader r(*doc, "x.json");
  ExpectOneLineError(r.RequiredPositiveInt("neg").status(), ErrorCode::kCorrupt,
                     {"x.json: neg", "-3"});
  ExpectOneLineError(r.RequiredPositiveInt("big").status(), ErrorCode::kCorrupt,
                     {"big", "18446744073709551615"});
  ExpectOneLineError(r.RequiredPositiveInt("f").status(), ErrorCode::kCorrupt,
                     {"f must be an integer", "1.5"});
  ExpectOneLineError(r.RequiredPositiveInt("absent").status(), ErrorCode::kCorrupt,
                     {"absent is missing"});
  ExpectOneLineError(r.OptionalFiniteDouble("s", 0, 1).status(), ErrorCode::kCorrupt,
                     {"s must be a number", "\"x\""});
  ExpectOneLineError(r.OptionalFiniteDouble("f", 0, 1).status(), ErrorCode::kCorrupt,
                     {"f must be a finite number in [0.0, 1.0]", "1.5"});
  ExpectOneLineError(r.OptionalBool("s").status(), ErrorCode::kCorrupt, {"true or false"});
  ExpectOneLineError(r.IntOrIntList("l").status(), ErrorCode::kCorrupt, {"l[1]"});
  ExpectOneLineError(r.IntOrIntList("s").status(), ErrorCode::kCorrupt, {"list of integers"});
}

}  // namespace
}  // namespace tessera
