// Malformed GGUF files: each must give a one-line error naming the file and the problem, and
// never crash or allocate for a count the file cannot hold (this suite also runs under
// ASan+UBSan, where a 10^18-element allocation would abort).
#include <gtest/gtest.h>

#include "format/gguf.h"
#include "format/gguf_quants.h"
#include "format_test_util.h"
#include "support/gguf_writer.h"
#include "test_support.h"

namespace tessera {
namespace {

using test::AppendGgufString;
using test::AppendLe;
using test::ExpectOneLineError;
using test::GgufWriter;

constexpr uint64_t kHuge = 1'000'000'000'000'000'000ull;  // 10^18

Status ParseStatus(const std::string& bytes) {
  return GgufFile::Parse("bad.gguf",
                         std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()))
      .status();
}

void ExpectBad(const std::string& bytes, ErrorCode code,
               std::initializer_list<const char*> fragments) {
  const Status s = ParseStatus(bytes);
  ExpectOneLineError(s, code, fragments);
  if (!s.ok()) {
    EXPECT_EQ(s.message().rfind("bad.gguf: ", 0), 0u) << s.message();
  }
}

// A small valid file with every kind of entry; its last tensor ends the file exactly, so
// every proper prefix is truncated somewhere that matters.
GgufWriter SmallValid() {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddU32("llama.block_count", 1);
  w.AddF32("llama.rope.freq_base", 10000.0f);
  w.AddBool("general.flag", false);
  w.AddStringArray("tokenizer.ggml.tokens", {"<s>", "a", "bc"});
  w.AddF32Array("tokenizer.ggml.scores", {0, -1, -2});
  w.AddI32Array("tokenizer.ggml.token_type", {3, 1, 1});
  w.AddTensor("blk.0.attn_q.weight", GgmlType::kQ8_0, {32, 2}, std::string(68, '\x02'));
  w.AddTensor("output_norm.weight", GgmlType::kF32, {8}, std::string(32, '\0'));
  return w;
}

TEST(MalformedGguf, ControlCaseParses) {
  const std::string bytes = SmallValid().Build();
  EXPECT_TRUE(ParseStatus(bytes).ok()) << ParseStatus(bytes).ToString();
}

TEST(MalformedGguf, TruncatedAtEveryOffset) {
  const std::string bytes = SmallValid().Build();
  for (size_t n = 0; n < bytes.size(); ++n) {
    SCOPED_TRACE("truncated to " + std::to_string(n) + " of " + std::to_string(bytes.size()));
    const Status s = ParseStatus(bytes.substr(0, n));
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), ErrorCode::kCorrupt) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
    EXPECT_EQ(s.message().rfind("bad.gguf: ", 0), 0u) << s.message();
  }
}

TEST(MalformedGguf, TruncatedFileOnDisk) {
  test::TempDir tmp;
  const std::string bytes = SmallValid().Build();
  test::WriteFile(tmp.File("cut.gguf"), bytes.substr(0, bytes.size() - 1));
  ExpectOneLineError(GgufFile::Open(tmp.File("cut.gguf")).status(), ErrorCode::kCorrupt,
                     {"cut.gguf", "'output_norm.weight'", "past the end of the data section"});
}

TEST(MalformedGguf, BadHeader) {
  ExpectBad("", ErrorCode::kCorrupt, {"0 bytes", "too short"});
  ExpectBad(std::string("GGUF\x03\0\0\0", 8), ErrorCode::kCorrupt, {"too short"});
  std::string bytes = SmallValid().Build();
  bytes[0] = 'X';
  ExpectBad(bytes, ErrorCode::kCorrupt, {"not a GGUF file"});
  bytes = GgufWriter(1).Build();
  ExpectBad(bytes, ErrorCode::kUnsupported, {"version 1", "convert the model again"});
  ExpectBad(GgufWriter(4).Build(), ErrorCode::kUnsupported, {"version 4", "2 and 3"});
  ExpectBad(GgufWriter(0x03000000).Build(), ErrorCode::kUnsupported, {"big-endian"});
}

TEST(MalformedGguf, HugeCounts) {
  GgufWriter w = SmallValid();
  w.SetCounts(kHuge, std::nullopt);
  ExpectBad(w.Build(), ErrorCode::kCorrupt, {"tensor count 1000000000000000000", "cannot fit"});
  w.SetCounts(std::nullopt, kHuge);
  ExpectBad(w.Build(), ErrorCode::kCorrupt, {"metadata count 1000000000000000000"});
  w.SetCounts(std::nullopt, ~uint64_t{0});
  ExpectBad(w.Build(), ErrorCode::kCorrupt, {"metadata count 18446744073709551615"});
  // More tensors claimed than written: the next "tensor info" runs out of file.
  w.SetCounts(3, std::nullopt);
  ExpectBad(w.Build(), ErrorCode::kCorrupt, {"tensor info"});

  for (uint32_t item_type : {0u, 8u, 12u}) {
    GgufWriter a;
    std::string payload;
    AppendLe(&payload, item_type, 4);
    AppendLe(&payload, kHuge, 8);
    a.AddRaw("big.array", 9, payload);
    ExpectBad(a.Build(), ErrorCode::kCorrupt, {"'big.array'", "claims 1000000000000000000"});
  }
}

TEST(MalformedGguf, BadStrings) {
  GgufWriter w;
  std::string payload;
  AppendLe(&payload, kHuge, 8);
  w.AddRaw("s", 8, payload + "abc");
  ExpectBad(w.Build(), ErrorCode::kCorrupt, {"value of 's'", "claims 1000000000000000000"});

  // A string array whose third item's length is a lie.
  GgufWriter a;
  payload.clear();
  AppendLe(&payload, 8, 4);
  AppendLe(&payload, 3, 8);
  AppendGgufString(&payload, "ok");
  AppendGgufString(&payload, "ok");
  AppendLe(&payload, 1u << 30, 8);
  a.AddRaw("arr", 9, payload + "zz");
  ExpectBad(a.Build(), ErrorCode::kCorrupt, {"'arr'", "item 2", "1073741824"});

  GgufWriter k;
  k.AddU32(std::string(70000, 'k'), 1);
  ExpectBad(k.Build(), ErrorCode::kCorrupt, {"key of metadata entry 0", "70000", "limit"});
  GgufWriter bad_utf8;
  bad_utf8.AddU32("a\xff", 1);
  ExpectBad(bad_utf8.Build(), ErrorCode::kCorrupt, {"not UTF-8"});
  GgufWriter empty_key;
  empty_key.AddU32("", 1);
  ExpectBad(empty_key.Build(), ErrorCode::kCorrupt, {"empty key"});

  GgufWriter long_name;
  long_name.AddTensor(std::string(64, 'n'), GgmlType::kF32, {1}, std::string(4, '\0'));
  ExpectBad(long_name.Build(), ErrorCode::kCorrupt, {"64 bytes", "at most 63"});
  GgufWriter bad_name;
  bad_name.AddTensor("w\xc3", GgmlType::kF32, {1}, std::string(4, '\0'));
  ExpectBad(bad_name.Build(), ErrorCode::kCorrupt, {"tensor info 0", "not UTF-8"});
}

TEST(MalformedGguf, UnknownAndNestedValueTypes) {
  GgufWriter w;
  w.AddRaw("weird", 13, "xxxx");
  ExpectBad(w.Build(), ErrorCode::kCorrupt, {"'weird'", "value type 13"});
  GgufWriter a;
  std::string payload;
  AppendLe(&payload, 99, 4);
  AppendLe(&payload, 1, 8);
  a.AddRaw("arr", 9, payload + "x");
  ExpectBad(a.Build(), ErrorCode::kCorrupt, {"'arr'", "value type 99"});
  GgufWriter nested;
  payload.clear();
  AppendLe(&payload, 9, 4);
  AppendLe(&payload, 1, 8);
  nested.AddRaw("nest", 9, payload);
  ExpectBad(nested.Build(), ErrorCode::kUnsupported, {"'nest'", "array of arrays"});
  GgufWriter b;
  b.AddRaw("flag", 7, "\x02");
  ExpectBad(b.Build(), ErrorCode::kCorrupt, {"'flag'", "0 or 1"});
}

TEST(MalformedGguf, DuplicateKeysAndTensors) {
  GgufWriter w;
  w.AddU32("general.alignment", 32);
  w.AddString("general.alignment", "x");
  ExpectBad(w.Build(), ErrorCode::kCorrupt, {"'general.alignment'", "twice"});
  GgufWriter t;
  t.AddTensor("w", GgmlType::kF32, {1}, std::string(4, '\0'));
  t.AddTensor("w", GgmlType::kF32, {1}, std::string(4, '\0'));
  ExpectBad(t.Build(), ErrorCode::kCorrupt, {"tensor 'w'", "twice"});
}

TEST(MalformedGguf, BadAlignment) {
  for (uint32_t a : {0u, 3u, 48u}) {
    GgufWriter w;
    w.AddU32("general.alignment", a);
    ExpectBad(w.Build(), ErrorCode::kCorrupt,
              {"general.alignment", std::to_string(a).c_str(), "power of two"});
  }
  GgufWriter s;
  s.AddString("general.alignment", "32");
  ExpectBad(s.Build(), ErrorCode::kCorrupt, {"'general.alignment'", "found string"});
  // Alignment far larger than the file: the data section cannot start.
  GgufWriter big;
  big.AddU32("general.alignment", 1u << 31);
  big.AddTensor("w", GgmlType::kF32, {1}, std::string(4, '\0'), 0);
  ExpectBad(big.Build(), ErrorCode::kCorrupt, {"data section would start", "past the end"});
}

TEST(MalformedGguf, BadTensorShapesAndTypes) {
  auto one = [](std::vector<uint64_t> dims, uint32_t type, size_t bytes) {
    GgufWriter w;
    w.AddTensor("w", static_cast<GgmlType>(type), std::move(dims), std::string(bytes, '\0'));
    return w.Build();
  };
  ExpectBad(one({}, 0, 4), ErrorCode::kCorrupt, {"'w'", "0 dimensions", "1 to 4"});
  ExpectBad(one({1, 1, 1, 1, 1}, 0, 4), ErrorCode::kCorrupt, {"5 dimensions"});
  ExpectBad(one({4, 0}, 0, 0), ErrorCode::kCorrupt, {"[4, 0]", "a dimension is 0"});
  ExpectBad(one({1ull << 32, 1ull << 32}, 0, 4), ErrorCode::kCorrupt, {"overflows"});
  ExpectBad(one({~uint64_t{0}}, 0, 4), ErrorCode::kCorrupt, {"overflows"});
  ExpectBad(one({32}, 4, 18), ErrorCode::kUnsupported, {"'w'", "ggml type 4", "does not know"});
  ExpectBad(one({32}, 999, 18), ErrorCode::kUnsupported, {"ggml type 999"});
  ExpectBad(one({100}, 12, 144), ErrorCode::kCorrupt, {"'w'", "100 elements of Q4_K"});
  // Byte size overflow through a block type: 2^58 Q8_0 blocks of 34 bytes.
  ExpectBad(one({32ull << 58}, 8, 34), ErrorCode::kCorrupt, {"overflow"});
  // A plausible shape whose data the file does not hold.
  ExpectBad(one({4096, 4096}, 0, 64), ErrorCode::kCorrupt, {"past the end of the data section"});
}

TEST(MalformedGguf, LyingTensorOffsets) {
  GgufWriter past;
  past.AddTensor("w", GgmlType::kF32, {8}, std::string(32, '\0'), 1u << 20);
  ExpectBad(past.Build(), ErrorCode::kCorrupt,
            {"'w'", "1048576..1048608", "past the end of the data section"});
  GgufWriter unaligned;
  unaligned.AddTensor("w", GgmlType::kF32, {8}, std::string(32, '\0'), 4);
  ExpectBad(unaligned.Build(), ErrorCode::kCorrupt, {"offset 4", "multiple of the alignment 32"});
  GgufWriter wrap;
  wrap.AddTensor("w", GgmlType::kF32, {8}, std::string(32, '\0'), ~uint64_t{0} - 31);
  ExpectBad(wrap.Build(), ErrorCode::kCorrupt, {"overflows 64 bits"});
  GgufWriter overlap;
  overlap.AddTensor("a", GgmlType::kF32, {16}, std::string(64, '\0'));
  overlap.AddTensor("b", GgmlType::kF32, {8}, std::string(32, '\0'), 32);
  ExpectBad(overlap.Build(), ErrorCode::kCorrupt, {"'a'", "'b'", "overlap"});
  GgufWriter same;
  same.AddTensor("a", GgmlType::kF32, {8}, std::string(32, '\0'));
  same.AddTensor("b", GgmlType::kF32, {8}, std::string(32, '\0'), 0);
  ExpectBad(same.Build(), ErrorCode::kCorrupt, {"overlap"});
}

TEST(MalformedGguf, GarbageNeverCrashes) {
  // Every single-byte corruption of the small file either parses or gives a one-line error,
  // and whatever parses dequantizes (or refuses its type) without reading out of bounds.
  const std::string good = SmallValid().Build();
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t v : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x7f}}) {
      std::string bytes = good;
      bytes[i] = static_cast<char>(v);
      auto f = GgufFile::Parse(
          "bad.gguf", std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
      if (!f) {
        EXPECT_EQ(f.status().message().find('\n'), std::string::npos);
        continue;
      }
      for (const GgufTensor& t : f->tensors()) {
        if (t.num_elements > (1u << 16)) continue;
        std::vector<float> out(t.num_elements);
        (void)DequantizeRows(t, 0, t.rows(), out);
      }
    }
  }
}

}  // namespace
}  // namespace tessera
