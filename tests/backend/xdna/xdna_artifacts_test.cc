// NPU program artifacts: the xclbin (axlf) reader/writer, the instruction-sequence (TXN) checks
// and the artifact manifest. Every fixture is built here; malformed inputs must be refused
// with a message, never crash (this test also runs under ASan + UBSan).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "backend/xdna/artifact_manifest.h"
#include "backend/xdna/npu_target.h"
#include "backend/xdna/txn.h"
#include "backend/xdna/xclbin.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// XRT's layout, written out independently of the code under test: the section table starts
// at byte 456 with 40-byte headers {kind u32, name[16], pad 4, offset u64, size u64}; the
// axlf header starts at 304 (m_length at +0, m_numSections at +144).
constexpr size_t kTable = 456;
constexpr size_t kNumSectionsAt = 304 + 144;

uint64_t Get(const std::vector<uint8_t>& b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | b[at + i];
  return v;
}
void Set(std::vector<uint8_t>& b, size_t at, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
// The header index of the first section of `kind`.
size_t SectionHeader(const std::vector<uint8_t>& b, uint32_t kind) {
  uint32_t n = static_cast<uint32_t>(Get(b, kNumSectionsAt, 4));
  for (uint32_t i = 0; i < n; ++i) {
    if (Get(b, kTable + 40 * i, 4) == kind) return kTable + 40 * i;
  }
  ADD_FAILURE() << "no section of kind " << kind;
  return kTable;
}
size_t SectionData(const std::vector<uint8_t>& b, uint32_t kind) {
  return static_cast<size_t>(Get(b, SectionHeader(b, kind) + 24, 8));
}

::testing::AssertionResult FailsWith(const Status& s, std::initializer_list<std::string> parts) {
  if (s.ok()) return ::testing::AssertionFailure() << "expected an error, got ok";
  for (const auto& p : parts) {
    if (s.message().find(p) == std::string::npos) {
      return ::testing::AssertionFailure() << "message lacks '" << p << "': " << s.message();
    }
  }
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------- xclbin

TEST(Xclbin, RoundTripsMlirAieShape) {
  std::vector<uint8_t> file = BuildXclbin(XclbinSpec{});
  ASSERT_EQ(file.size() % 8, 0u);
  ASSERT_EQ(std::memcmp(file.data(), "xclbin2\0", 8), 0);
  EXPECT_EQ(Get(file, 304, 8), file.size());  // m_length
  auto info = ParseXclbin(file);
  ASSERT_TRUE(info) << info.status().message();
  // The default uuid spells "tessera-npu-test" in ASCII.
  EXPECT_EQ(info->UuidString(), "74657373-6572-612d-6e70-752d74657374");
  ASSERT_EQ(info->mem_banks.size(), 2u);
  EXPECT_EQ(info->mem_banks[0].tag, "HOST");
  EXPECT_EQ(info->mem_banks[0].size_kb, 0x10000u);
  EXPECT_EQ(info->mem_banks[1].tag, "SRAM");
  EXPECT_EQ(info->mem_banks[1].size_kb, 0xc000u);
  EXPECT_TRUE(info->mem_banks[1].used);
  ASSERT_EQ(info->ips.size(), 1u);
  EXPECT_EQ(info->ips[0].name, "MLIR_AIE:MLIRAIE");
  EXPECT_EQ(info->ips[0].type, 7u);                 // IP_PS_KERNEL
  EXPECT_EQ(info->ips[0].properties, 0x09010001u);  // DPU subtype, kernel id 0x901
  ASSERT_EQ(info->kernels.size(), 1u);
  const XclbinKernel* k = info->FindKernel("MLIR_AIE");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(info->FindKernel("MLIR"), nullptr);
  EXPECT_TRUE(k->has_metadata);
  EXPECT_EQ(k->type, "dpu");
  EXPECT_EQ(k->instances, std::vector<std::string>({"MLIRAIE"}));
  EXPECT_EQ(ArgNames(k->args), std::vector<std::string>({"opcode", "instr", "ninstr", "bo0", "bo1",
                                                         "bo2", "bo3", "bo4"}));
  const uint64_t offsets[] = {0x00, 0x08, 0x10, 0x14, 0x1c, 0x24, 0x2c, 0x34};
  const char* tags[] = {"", "SRAM", "", "HOST", "HOST", "HOST", "HOST", "HOST"};
  const int banks[] = {-1, 1, -1, 0, 0, 0, 0, 0};
  for (size_t i = 0; i < k->args.size(); ++i) {
    EXPECT_EQ(k->args[i].id, static_cast<int>(i));
    EXPECT_EQ(k->args[i].offset, offsets[i]) << k->args[i].name;
    EXPECT_EQ(k->args[i].mem_tag, tags[i]) << k->args[i].name;
    EXPECT_EQ(k->args[i].mem_index, banks[i]) << k->args[i].name;
  }
  EXPECT_EQ(k->args[0].type, "uint64_t");
  EXPECT_EQ(k->args[1].type, "char *");
  EXPECT_EQ(k->args[1].address_qualifier, 1);
  EXPECT_EQ(k->args[2].size, 4u);
  ASSERT_TRUE(info->aie_partition.has_value());
  EXPECT_EQ(info->aie_partition->column_width, 4);
  EXPECT_EQ(info->aie_partition->start_columns, std::vector<uint16_t>({0}));
  EXPECT_EQ(info->aie_partition->name, "QoS");
  EXPECT_EQ(info->connections.size(), 6u);  // instr + bo0..bo4
}

TEST(Xclbin, RoundTripsOtherSpecs) {
  XclbinSpec spec;
  spec.kernel_name = "GEMV";
  spec.instance_name = "G0";
  spec.ip_type = kIpTypeKernel;
  spec.column_width = 8;
  spec.start_columns = {0, 8};
  spec.args.resize(4);  // opcode, instr, ninstr, bo0
  spec.uuid.fill(0xab);
  auto info = ParseXclbin(BuildXclbin(spec));
  ASSERT_TRUE(info) << info.status().message();
  EXPECT_EQ(info->UuidString(), "abababab-abab-abab-abab-abababababab");
  ASSERT_NE(info->FindKernel("GEMV"), nullptr);
  EXPECT_EQ(ArgNames(info->FindKernel("GEMV")->args),
            std::vector<std::string>({"opcode", "instr", "ninstr", "bo0"}));
  EXPECT_EQ(info->aie_partition->column_width, 8);
  EXPECT_EQ(info->aie_partition->start_columns, std::vector<uint16_t>({0, 8}));

  spec.with_metadata = false;
  spec.with_aie_partition = false;
  info = ParseXclbin(BuildXclbin(spec));
  ASSERT_TRUE(info) << info.status().message();
  EXPECT_FALSE(info->FindKernel("GEMV")->has_metadata);
  EXPECT_TRUE(info->FindKernel("GEMV")->args.empty());
  EXPECT_FALSE(info->aie_partition.has_value());
}

TEST(Xclbin, EveryTruncationIsRefused) {
  const std::vector<uint8_t> file = BuildXclbin(XclbinSpec{});
  for (size_t n = 0; n < file.size(); ++n) {
    auto info = ParseXclbin(std::span<const uint8_t>(file.data(), n));
    EXPECT_FALSE(info) << "prefix of " << n << " bytes was accepted";
  }
}

TEST(Xclbin, ByteFlipsNeverCrash) {
  const std::vector<uint8_t> file = BuildXclbin(XclbinSpec{});
  size_t refused = 0, parsed = 0;
  for (size_t i = 0; i < file.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> bad = file;
      bad[i] ^= mask;
      auto info = ParseXclbin(bad);
      (info ? parsed : refused)++;
      if (!info) {
        EXPECT_FALSE(info.status().message().empty());
      }
    }
  }
  EXPECT_GT(refused, 0u);
  EXPECT_GT(parsed, 0u);  // e.g. flips inside the key block or tag padding are harmless
  // Multi-byte damage with a fixed pseudo-random sequence.
  uint32_t state = 12345;
  for (int round = 0; round < 3000; ++round) {
    std::vector<uint8_t> bad = file;
    for (int j = 0; j < 6; ++j) {
      state = state * 1664525u + 1013904223u;
      bad[(state >> 8) % bad.size()] = static_cast<uint8_t>(state >> 24);
    }
    (void)ParseXclbin(bad);
  }
}

TEST(Xclbin, RefusesBadMagicAndLength) {
  std::vector<uint8_t> file = BuildXclbin(XclbinSpec{});
  std::vector<uint8_t> bad = file;
  bad[6] = '1';  // "xclbin1"
  EXPECT_TRUE(FailsWith(ParseXclbin(bad).status(), {"magic"}));
  bad = file;
  Set(bad, 304, file.size() + 1, 8);
  EXPECT_TRUE(FailsWith(ParseXclbin(bad).status(), {"length", "truncated"}));
  bad = file;
  Set(bad, 304, 100, 8);
  EXPECT_FALSE(ParseXclbin(bad));
}

TEST(Xclbin, RefusesSectionsOutsideTheFile) {
  const std::vector<uint8_t> file = BuildXclbin(XclbinSpec{});
  const size_t mem = SectionHeader(file, 6);
  std::vector<uint8_t> bad = file;
  Set(bad, mem + 24, file.size(), 8);  // offset at the end, size > 0
  EXPECT_TRUE(FailsWith(ParseXclbin(bad).status(), {"MEM_TOPOLOGY", "outside"}));
  bad = file;
  Set(bad, mem + 24, ~uint64_t{0} - 4, 8);  // offset + size wraps around
  EXPECT_TRUE(FailsWith(ParseXclbin(bad).status(), {"outside"}));
  bad = file;
  Set(bad, mem + 32, ~uint64_t{0}, 8);  // size that would overflow offset + size
  EXPECT_TRUE(FailsWith(ParseXclbin(bad).status(), {"outside"}));
  bad = file;
  Set(bad, mem + 24, 8, 8);  // points into the header
  EXPECT_TRUE(FailsWith(ParseXclbin(bad).status(), {"outside"}));
}

TEST(Xclbin, RefusesOverflowSizedCounts) {
  const std::vector<uint8_t> file = BuildXclbin(XclbinSpec{});
  std::vector<uint8_t> bad = file;
  Set(bad, kNumSectionsAt, 0xffffffffu, 4);
  EXPECT_TRUE(FailsWith(ParseXclbin(bad).status(), {"sections"}));
  bad = file;
  Set(bad, kNumSectionsAt, 0x10000, 4);  // allowed count, but the table runs past the file
  EXPECT_TRUE(FailsWith(ParseXclbin(bad).status(), {"section headers"}));

  struct Case {
    uint32_t kind;
    size_t count_at;  // within the section
    uint32_t value;
    const char* expect;
  };
  const Case cases[] = {
      {6, 0, 0x7fffffff, "MEM_TOPOLOGY declares"},
      {6, 0, 0x80000000, "negative count"},
      {8, 0, 0x7fffffff, "IP_LAYOUT declares"},
      {7, 0, 0x7fffffff, "CONNECTIVITY declares"},
      {7, 4 + 8, 5, "points outside"},           // first connection's bank index
      {7, 4 + 4, 0x80000000, "points outside"},  // first connection's ip index < 0
      {32, 40, 0xffffffff, "start_columns"},     // start_columns.size
      {32, 44, 0xfffffff0, "start_columns"},     // start_columns.offset
      {32, 4, 0x7fffffff, "name offset"},
  };
  for (const Case& c : cases) {
    bad = file;
    Set(bad, SectionData(bad, c.kind) + c.count_at, c.value, 4);
    EXPECT_TRUE(FailsWith(ParseXclbin(bad).status(), {c.expect})) << c.expect;
  }
  bad = file;
  Set(bad, SectionData(bad, 32) + 32, 0, 2);  // column width 0
  EXPECT_TRUE(FailsWith(ParseXclbin(bad).status(), {"column width 0"}));
}

TEST(Xclbin, RefusesDuplicateSectionsAndBadMetadata) {
  const std::vector<uint8_t> file = BuildXclbin(XclbinSpec{});
  std::vector<uint8_t> bad = file;
  Set(bad, SectionHeader(bad, 8), 6, 4);  // IP_LAYOUT relabelled as a second MEM_TOPOLOGY
  EXPECT_TRUE(FailsWith(ParseXclbin(bad).status(), {"two MEM_TOPOLOGY"}));

  auto with_xml = [&](const std::string& from, const std::string& to) {
    std::vector<uint8_t> b = file;
    size_t at = SectionData(b, 2);
    size_t size = static_cast<size_t>(Get(b, SectionHeader(b, 2) + 32, 8));
    std::string xml(b.begin() + at, b.begin() + at + size);
    size_t p = xml.find(from);
    EXPECT_NE(p, std::string::npos) << from;
    if (p == std::string::npos) return b;
    EXPECT_EQ(from.size(), to.size());  // keep the section size
    xml.replace(p, from.size(), to);
    std::copy(xml.begin(), xml.end(), b.begin() + at);
    return b;
  };
  EXPECT_TRUE(FailsWith(ParseXclbin(with_xml("id=\"2\"", "id=\"1\"")).status(), {"two arguments"}));
  EXPECT_TRUE(FailsWith(ParseXclbin(with_xml("offset=\"0x8\"", "offset=\"0xZ\"")).status(),
                        {"instr", "not a number"}));
  EXPECT_TRUE(
      FailsWith(ParseXclbin(with_xml("</kernel>", "</kernex>")).status(), {"no </kernel>"}));
  EXPECT_TRUE(FailsWith(ParseXclbin(with_xml("name=\"bo4\"", "name=\"bo4 ")).status(),
                        {"EMBEDDED_METADATA"}));
  // A renamed XML kernel leaves the IP_LAYOUT kernel without metadata (not an error).
  auto renamed = ParseXclbin(with_xml("<kernel name=\"MLIR_AIE\"", "<kernel name=\"MLIR_AIX\""));
  ASSERT_TRUE(renamed) << renamed.status().message();
  EXPECT_FALSE(renamed->FindKernel("MLIR_AIE")->has_metadata);
}

// ---------------------------------------------------------------- TXN

std::vector<TxnOp> SomeOps() {
  return {TxnWrite(0x1d004, 7), TxnMaskWrite(0x1d008, 1, 0xff), TxnBlockWrite(0x1d000, {1, 2, 3}),
          TxnSync(0, 0, 0, 1),  TxnAddressPatch(0x1d004, 3, 0), TxnMaskPoll(0x1d010, 0, 1)};
}

TEST(Txn, RoundTrips) {
  std::vector<uint8_t> insts = BuildTxn({}, SomeOps());
  // 16 header + 4 * (6 + 7 + 7 + 4 + 12 + 7) bytes
  ASSERT_EQ(insts.size(), 16u + 4 * 43);
  // word0 = rows 6 << 24 | devGen 3 << 16 | minor 1 << 8 | major 0
  EXPECT_EQ(Get(insts, 0, 4), 0x06030100u);
  EXPECT_EQ(Get(insts, 4, 4), 0x0104u);
  auto info = ParseTxnHeader(insts);
  ASSERT_TRUE(info) << info.status().message();
  EXPECT_EQ(info->major, 0);
  EXPECT_EQ(info->minor, 1);
  EXPECT_EQ(info->device_generation, 3);
  EXPECT_EQ(info->rows, 6);
  EXPECT_EQ(info->columns, 4);
  EXPECT_EQ(info->mem_tile_rows, 1);
  EXPECT_EQ(info->op_count, 6u);
  EXPECT_EQ(info->walked_ops, 6u);
  EXPECT_EQ(info->custom_ops, 2u);
  EXPECT_EQ(info->total_bytes, insts.size());
  EXPECT_TRUE(CheckTxnForTarget(*info, NpuTargetFor(XdnaGeneration::kXdna1)).ok());

  auto empty = ParseTxnHeader(BuildTxn({}, {}));
  ASSERT_TRUE(empty) << empty.status().message();
  EXPECT_EQ(empty->op_count, 0u);
}

TEST(Txn, EveryTruncationIsRefused) {
  const std::vector<uint8_t> insts = BuildTxn({}, SomeOps());
  for (size_t n = 0; n < insts.size(); ++n) {
    EXPECT_FALSE(ParseTxnHeader(std::span<const uint8_t>(insts.data(), n))) << n;
  }
  // Truncated but with the header's byte count patched to match: the walk must catch it.
  for (size_t n = 16; n < insts.size(); n += 4) {
    std::vector<uint8_t> cut(insts.begin(), insts.begin() + n);
    Set(cut, 12, n, 4);
    EXPECT_FALSE(ParseTxnHeader(cut)) << n;
  }
}

TEST(Txn, ByteFlipsNeverCrash) {
  const std::vector<uint8_t> insts = BuildTxn({}, SomeOps());
  size_t refused = 0;
  for (size_t i = 0; i < insts.size(); ++i) {
    for (uint8_t mask : {0x01, 0x40, 0x80, 0xff}) {
      std::vector<uint8_t> bad = insts;
      bad[i] ^= mask;
      if (!ParseTxnHeader(bad)) ++refused;
    }
  }
  EXPECT_GT(refused, 0u);
}

TEST(Txn, RefusesMalformedSequences) {
  const std::vector<uint8_t> insts = BuildTxn({}, SomeOps());
  std::vector<uint8_t> bad = insts;
  bad[16] = 0x02;  // BLOCKSET: a real opcode whose size this reader does not know
  EXPECT_TRUE(FailsWith(ParseTxnHeader(bad).status(), {"unknown opcode 0x2", "byte 16"}));
  bad = insts;
  Set(bad, 8, 7, 4);
  EXPECT_TRUE(FailsWith(ParseTxnHeader(bad).status(), {"7 ops", "6"}));
  bad = insts;
  Set(bad, 8, 0xffffffffu, 4);
  EXPECT_TRUE(FailsWith(ParseTxnHeader(bad).status(), {"ops"}));
  bad = insts;
  Set(bad, 8, 5, 4);
  EXPECT_TRUE(FailsWith(ParseTxnHeader(bad).status(), {"more ops"}));
  bad = insts;
  Set(bad, 12, insts.size() + 4, 4);
  EXPECT_TRUE(FailsWith(ParseTxnHeader(bad).status(), {"header says"}));
  bad = insts;
  bad.push_back(0);
  EXPECT_TRUE(FailsWith(ParseTxnHeader(bad).status(), {"multiple of 4"}));
  bad = insts;
  Set(bad, 0, 0x06030001u, 4);  // version 1.0, the pre-0.1 format
  EXPECT_TRUE(FailsWith(ParseTxnHeader(bad).status(), {"version 1.0"}));
  // WRITE whose size field is wrong; BLOCKWRITE (at 16 + 4*13) with size 0 and a huge size.
  bad = insts;
  Set(bad, 16 + 20, 28, 4);
  EXPECT_TRUE(FailsWith(ParseTxnHeader(bad).status(), {"size field 28"}));
  const size_t block_write = 16 + 4 * 13;
  ASSERT_EQ(bad[block_write], kTxnBlockWrite);
  for (uint32_t size : {0u, 6u, 0xfffffffcu}) {
    bad = insts;
    Set(bad, block_write + 12, size, 4);
    EXPECT_TRUE(FailsWith(ParseTxnHeader(bad).status(), {"byte " + std::to_string(block_write)}))
        << size;
  }
  const size_t sync = block_write + 4 * 7;
  ASSERT_EQ(bad[sync], 0x80);
  bad = insts;
  Set(bad, sync + 4, 0, 4);  // custom op of size 0 would loop forever
  EXPECT_TRUE(FailsWith(ParseTxnHeader(bad).status(), {"byte " + std::to_string(sync)}));
}

TEST(Txn, RefusesTheWrongGeneration) {
  const NpuTarget& xdna1 = NpuTargetFor(XdnaGeneration::kXdna1);
  const NpuTarget& xdna2 = NpuTargetFor(XdnaGeneration::kXdna2);
  auto npu2 = ParseTxnHeader(BuildTxn({.device_generation = 4, .columns = 8}, SomeOps()));
  ASSERT_TRUE(npu2) << npu2.status().message();
  EXPECT_TRUE(CheckTxnForTarget(*npu2, xdna2).ok());
  Status s = CheckTxnForTarget(*npu2, xdna1);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_TRUE(FailsWith(s, {"compiled for xdna2 (devGen 4", "device is xdna1 (devGen 3"}));

  auto npu1 = ParseTxnHeader(BuildTxn({}, SomeOps()));
  ASSERT_TRUE(npu1);
  EXPECT_TRUE(FailsWith(CheckTxnForTarget(*npu1, xdna2), {"xdna1 (devGen 3", "xdna2 (devGen 4"}));

  auto wide = ParseTxnHeader(BuildTxn({.columns = 8}, SomeOps()));
  ASSERT_TRUE(wide);
  EXPECT_TRUE(FailsWith(CheckTxnForTarget(*wide, xdna1), {"8 columns", "offers 4"}));
  auto tall = ParseTxnHeader(BuildTxn({.rows = 9}, SomeOps()));
  ASSERT_TRUE(tall);
  EXPECT_TRUE(FailsWith(CheckTxnForTarget(*tall, xdna1), {"9 rows"}));
  auto unknown = ParseTxnHeader(BuildTxn({.device_generation = 9}, SomeOps()));
  ASSERT_TRUE(unknown);
  EXPECT_TRUE(FailsWith(CheckTxnForTarget(*unknown, xdna1), {"unknown generation (devGen 9)"}));
}

// ---------------------------------------------------------------- manifest

class ManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/xdna_artifacts_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    program_.name = "gemv_bf16_k2048";
    program_.target = XdnaGeneration::kXdna1;
    program_.kernel = "MLIR_AIE";
    program_.xclbin = "gemv.xclbin";
    program_.insts = "sub/gemv.insts.bin";
    program_.arguments = {"opcode", "instr", "ninstr", "bo0", "bo1", "bo2", "bo3", "bo4"};
    program_.shapes = {{"K", {2048}}, {"M", {2048}}, {"tile", {32, 256}}};
    program_.dtype = "bf16";
    program_.numeric_contract = "bf16 in, fp32 accumulate, RNE to bf16, |err| <= 2 ulp";
    fs::create_directories(dir_ / "sub");
    Write(BuildXclbin(XclbinSpec{}), BuildTxn({}, SomeOps()));
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void Write(const std::vector<uint8_t>& xclbin, const std::vector<uint8_t>& insts) {
    ASSERT_TRUE(WriteProgramFiles(dir_.string(), program_, xclbin, insts).ok());
    ASSERT_TRUE(WriteArtifactManifest(dir_.string(), {program_}).ok());
    pristine_ = ReadJson();
  }
  json ReadJson() {
    std::ifstream in(dir_ / "manifest.json");
    return json::parse(in);
  }
  void WriteJson(const json& j) { std::ofstream(dir_ / "manifest.json") << j.dump(2); }
  // Loads after `edit` changed the first program's JSON.
  Status LoadWith(const std::function<void(json&)>& edit,
                  XdnaGeneration device = XdnaGeneration::kXdna1) {
    json j = pristine_;  // each edit starts from the manifest Write() produced
    edit(j);
    WriteJson(j);
    return LoadArtifactManifest(dir_.string(), NpuTargetFor(device)).status();
  }

  fs::path dir_;
  NpuProgramArtifact program_;
  json pristine_;
};

TEST_F(ManifestTest, LoadsAndVerifiesAProgram) {
  auto m = LoadArtifactManifest(dir_.string(), NpuTargetFor(XdnaGeneration::kXdna1));
  ASSERT_TRUE(m) << m.status().message();
  ASSERT_EQ(m->programs.size(), 1u);
  const NpuProgramArtifact* p = m->Find("gemv_bf16_k2048");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(m->Find("other"), nullptr);
  EXPECT_EQ(p->xclbin_path, fs::canonical(dir_ / "gemv.xclbin").string());
  EXPECT_EQ(p->insts_path, fs::canonical(dir_ / "sub/gemv.insts.bin").string());
  EXPECT_EQ(p->insts_info.device_generation, 3);
  EXPECT_EQ(p->xclbin_info.FindKernel("MLIR_AIE")->args.size(), 8u);
  EXPECT_EQ(p->shapes.at("tile"), std::vector<int64_t>({32, 256}));
  EXPECT_EQ(p->shapes.at("K"), std::vector<int64_t>({2048}));
  EXPECT_EQ(p->dtype, "bf16");
  EXPECT_EQ(ReadJson()["programs"][0]["xclbin_sha256"].get<std::string>().size(), 64u);
}

TEST_F(ManifestTest, LoadsAnXdna2Program) {
  program_.target = XdnaGeneration::kXdna2;
  XclbinSpec spec;
  spec.column_width = 8;
  Write(BuildXclbin(spec), BuildTxn({.device_generation = 4, .columns = 8}, SomeOps()));
  auto m = LoadArtifactManifest(dir_.string(), NpuTargetFor(XdnaGeneration::kXdna2));
  ASSERT_TRUE(m) << m.status().message();
  // ... and the same directory on an XDNA1 device is refused, naming both generations.
  Status s = LoadArtifactManifest(dir_.string(), NpuTargetFor(XdnaGeneration::kXdna1)).status();
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_TRUE(FailsWith(s, {"gemv_bf16_k2048", "xdna2", "device is xdna1"}));
}

TEST_F(ManifestTest, RefusesAWrongHash) {
  std::ofstream(dir_ / "gemv.xclbin", std::ios::app) << "x";
  EXPECT_TRUE(
      FailsWith(LoadArtifactManifest(dir_.string(), NpuTargetFor(XdnaGeneration::kXdna1)).status(),
                {"gemv.xclbin", "sha256"}));
  Write(BuildXclbin(XclbinSpec{}), BuildTxn({}, SomeOps()));
  EXPECT_TRUE(
      FailsWith(LoadWith([](json& j) { j["programs"][0]["insts_sha256"] = std::string(64, '0'); }),
                {"sub/gemv.insts.bin", "sha256"}));
  EXPECT_TRUE(
      FailsWith(LoadWith([](json& j) { j["programs"][0]["insts_sha256"] = std::string(64, 'A'); }),
                {"insts_sha256", "lowercase hex"}));
}

TEST_F(ManifestTest, RefusesAMissingFile) {
  fs::remove(dir_ / "sub/gemv.insts.bin");
  Status s = LoadArtifactManifest(dir_.string(), NpuTargetFor(XdnaGeneration::kXdna1)).status();
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_TRUE(FailsWith(s, {"sub/gemv.insts.bin", "does not exist"}));
  fs::remove(dir_ / "manifest.json");
  EXPECT_TRUE(
      FailsWith(LoadArtifactManifest(dir_.string(), NpuTargetFor(XdnaGeneration::kXdna1)).status(),
                {"manifest.json", "does not exist"}));
}

TEST_F(ManifestTest, RefusesPathsLeavingTheDirectory) {
  EXPECT_TRUE(FailsWith(LoadWith([](json& j) { j["programs"][0]["xclbin"] = "../gemv.xclbin"; }),
                        {"xclbin", "'..'"}));
  EXPECT_TRUE(FailsWith(LoadWith([](json& j) { j["programs"][0]["insts"] = "sub/../../x"; }),
                        {"insts", "'..'"}));
  EXPECT_TRUE(FailsWith(LoadWith([](json& j) { j["programs"][0]["xclbin"] = "/etc/hostname"; }),
                        {"absolute"}));
  EXPECT_TRUE(FailsWith(LoadWith([](json& j) { j["programs"][0]["xclbin"] = "sub//x"; }), {"''"}));
  // A symlink inside the directory that points outside it.
  fs::path outside = dir_.string() + "_outside.xclbin";
  fs::copy_file(dir_ / "gemv.xclbin", outside, fs::copy_options::overwrite_existing);
  fs::create_symlink(outside, dir_ / "link.xclbin");
  EXPECT_TRUE(FailsWith(LoadWith([](json& j) { j["programs"][0]["xclbin"] = "link.xclbin"; }),
                        {"link.xclbin", "outside"}));
  fs::remove(outside);
}

TEST_F(ManifestTest, RefusesUnknownFieldsAndVersions) {
  EXPECT_TRUE(FailsWith(LoadWith([](json& j) { j["programs"][0]["checksum"] = "x"; }),
                        {"unknown field 'checksum'"}));
  EXPECT_TRUE(
      FailsWith(LoadWith([](json& j) { j["comment"] = "x"; }), {"unknown field 'comment'"}));
  Status s = LoadWith([](json& j) { j["version"] = 2; });
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_TRUE(FailsWith(s, {"'version' is 2", "version 1"}));
  EXPECT_TRUE(FailsWith(LoadWith([](json& j) { j["version"] = "1"; }), {"'version'"}));
  EXPECT_TRUE(FailsWith(LoadWith([](json& j) { j["format"] = "other"; }), {"'format'"}));
  EXPECT_TRUE(FailsWith(LoadWith([](json& j) { j["programs"][0].erase("dtype"); }),
                        {"missing field 'dtype'"}));
  EXPECT_TRUE(FailsWith(LoadWith([](json& j) { j["programs"][0]["target"] = "xdna3"; }),
                        {"'target'", "xdna3"}));
  EXPECT_TRUE(
      FailsWith(LoadWith([](json& j) { j["programs"][0]["shapes"]["K"] = -1; }), {"shape 'K'"}));
  EXPECT_TRUE(FailsWith(LoadWith([](json& j) { j["programs"].push_back(j["programs"][0]); }),
                        {"two programs", "gemv_bf16_k2048"}));
  std::ofstream(dir_ / "manifest.json") << "{\"format\": ";
  EXPECT_TRUE(
      FailsWith(LoadArtifactManifest(dir_.string(), NpuTargetFor(XdnaGeneration::kXdna1)).status(),
                {"not valid JSON"}));
}

TEST_F(ManifestTest, RefusesKernelAndArgumentMismatches) {
  EXPECT_TRUE(FailsWith(LoadWith([](json& j) { j["programs"][0]["kernel"] = "GEMV"; }),
                        {"kernel 'GEMV' is not in xclbin", "MLIR_AIE"}));
  EXPECT_TRUE(FailsWith(LoadWith([](json& j) { j["programs"][0]["arguments"].erase(7); }),
                        {"arguments", "differ", "bo4"}));
  EXPECT_TRUE(
      FailsWith(LoadWith([](json& j) { j["programs"][0]["arguments"][1] = "instructions"; }),
                {"instructions", "instr"}));
  // The program says xdna2 but its insts were compiled for xdna1.
  EXPECT_TRUE(FailsWith(
      LoadWith([](json& j) { j["programs"][0]["target"] = "xdna2"; }, XdnaGeneration::kXdna2),
      {"declares target xdna2", "compiled for xdna1"}));
  // An xclbin without argument metadata cannot be checked.
  XclbinSpec spec;
  spec.with_metadata = false;
  Write(BuildXclbin(spec), BuildTxn({}, SomeOps()));
  EXPECT_TRUE(
      FailsWith(LoadArtifactManifest(dir_.string(), NpuTargetFor(XdnaGeneration::kXdna1)).status(),
                {"no EMBEDDED_METADATA"}));
  // A damaged xclbin (hash updated to match) is refused by the parser, naming the file.
  std::vector<uint8_t> broken = BuildXclbin(XclbinSpec{});
  broken.resize(broken.size() - 8);
  Write(broken, BuildTxn({}, SomeOps()));
  EXPECT_TRUE(
      FailsWith(LoadArtifactManifest(dir_.string(), NpuTargetFor(XdnaGeneration::kXdna1)).status(),
                {"gemv.xclbin", "truncated"}));
}

}  // namespace
}  // namespace tessera
