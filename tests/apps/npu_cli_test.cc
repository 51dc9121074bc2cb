// The NPU through the real CLI: `tessera doctor` on a fake sysfs tree, and --npu-layers on
// generate and bench with the FAKE XDNA device (--npu-device fake:xdna2: the NPU program's CPU
// reference kernels; nothing executes on an NPU) giving the cpu-only tokens.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_caches.h"
#include "backend/cpu/cpu_features.h"
#include "model/synthetic_checkpoint.h"
#include "test_support.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& path, const std::string& contents) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << contents;
}

// A Phoenix NPU bound to amdxdna: enough for discovery; the other checks report what the
// tree lacks.
std::string PhoenixTree(const test::TempDir& tmp) {
  const fs::path root = tmp.File("root");
  const fs::path pci = root / "sys/devices/pci0000:00/0000:00:08.2/0000:c4:00.1";
  Write(pci / "vendor", "0x1022\n");
  Write(pci / "device", "0x1502\n");
  Write(pci / "revision", "0x00\n");
  Write(pci / "fw_version", "1.5.2.380\n");
  fs::create_directories(root / "sys/bus/pci/drivers/amdxdna");
  fs::create_directories(root / "sys/bus/pci/devices");
  fs::create_symlink("../../../devices/pci0000:00/0000:00:08.2/0000:c4:00.1",
                     root / "sys/bus/pci/devices/0000:c4:00.1");
  fs::create_symlink("../../../../bus/pci/drivers/amdxdna", pci / "driver");
  fs::create_directories(pci / "accel/accel0");
  fs::create_symlink("../../../0000:c4:00.1", pci / "accel/accel0/device");
  fs::create_directories(root / "sys/class/accel");
  fs::create_symlink("../../devices/pci0000:00/0000:00:08.2/0000:c4:00.1/accel/accel0",
                     root / "sys/class/accel/accel0");
  return root.string();
}

TEST(NpuCli, DoctorJsonOnAFakeTreeNamesThePhoenixAndItsChecks) {
  test::TempDir tmp;
  const std::string root = PhoenixTree(tmp);
  auto r = test::RunTessera({"doctor", "--root", root, "--json"}, "", 60000);
  ASSERT_EQ(r.signal, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["devices"].size(), 1u);
  EXPECT_EQ(j["devices"][0]["generation"], "xdna1");
  EXPECT_EQ(j["devices"][0]["columns"], 4);
  EXPECT_EQ(j["devices"][0]["fw_version"], "1.5.2.380");
  // The exit code follows the checks: 1 exactly when one fails (the tree has no firmware file
  // and no XRT, so some do).
  bool failed = false;
  for (const auto& c : j["checks"]) failed = failed || c["status"] == "fail";
  EXPECT_TRUE(failed);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(j["checks"][0]["name"], "npu_present");
  EXPECT_EQ(j["checks"][0]["status"], "pass");
  EXPECT_EQ(j["cpu"]["ready"], true);  // the CPU is ready; the NPU present fails its checks
  // Stable: the same tree gives the same bytes.
  EXPECT_EQ(test::RunTessera({"doctor", "--root", root, "--json"}).out, r.out);
  auto bad = test::RunTessera({"doctor", "--bogus"});
  EXPECT_EQ(bad.exit_code, 2);
}

// A machine without an NPU: the CPU backend is reported first and the run passes (exit 0);
// the NPU rows are information, not failures or warnings.
TEST(NpuCli, DoctorWithoutAnNpuReportsTheCpuBackendAndExitsZero) {
  test::TempDir tmp;
  const fs::path root = tmp.File("root");
  Write(root / "proc/cmdline", "ro quiet\n");
  Write(root / "proc/meminfo",
        "MemTotal:       16303780 kB\nMemFree:  100 kB\n"
        "MemAvailable:    8151890 kB\n");
  auto r = test::RunTessera({"doctor", "--root", root.string(), "--json"}, "", 60000);
  ASSERT_EQ(r.signal, 0) << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::ordered_json::parse(r.out);
  ASSERT_EQ(j.begin().key(), "cpu");  // the CPU backend first
  const auto& cpu = j["cpu"];
  EXPECT_EQ(cpu["ready"], true);
  // The family the backend's dispatch point picks on this machine, with its kernels.
  EXPECT_EQ(cpu["isa"], std::string(CpuIsaName(DetectCpuIsa())));
  EXPECT_FALSE(cpu["reason"].get<std::string>().empty());
  EXPECT_NE(cpu["supported"].get<std::string>().find("scalar"), std::string::npos);
  ASSERT_TRUE(cpu["kernels"].is_array());
  EXPECT_EQ(cpu["kernels"][0], "matmul f32");
  // The decode prefetch of that family (every family names one) and the cache sizes.
  EXPECT_EQ(cpu["decode_prefetch"], std::string(DecodePrefetchName(DetectCpuIsa())));
  const CpuCaches caches = CpuCacheSizes();
  auto bytes_or_null = [](int64_t v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(); };
  EXPECT_EQ(cpu["caches"]["l1d_bytes"], bytes_or_null(caches.l1d_bytes));
  EXPECT_EQ(cpu["caches"]["l2_bytes"], bytes_or_null(caches.l2_bytes));
  EXPECT_EQ(cpu["caches"]["l3_bytes"], bytes_or_null(caches.l3_bytes));
  EXPECT_GE(cpu["threads"].get<int>(), 1);
  EXPECT_EQ(cpu["memory_total_bytes"], 16303780ull * 1024);
  EXPECT_EQ(cpu["memory_available_bytes"], 8151890ull * 1024);
  EXPECT_TRUE(j["devices"].empty());
  ASSERT_EQ(j["checks"].size(), 7u);
  for (const auto& c : j["checks"]) EXPECT_EQ(c["status"], "info") << c.dump();

  auto text = test::RunTessera({"doctor", "--root", root.string()}, "", 60000);
  EXPECT_EQ(text.exit_code, 0) << text.out;
  EXPECT_EQ(
      text.out.rfind(
          "CPU backend: ready\n  isa       " + std::string(CpuIsaName(DetectCpuIsa())) + ": ", 0),
      0u)
      << text.out;
  EXPECT_NE(text.out.find("0 failed, 0 warnings (no NPU in use: the CPU backend runs every layer)"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("; decode prefetch " + std::string(DecodePrefetchName(DetectCpuIsa())) +
                          "\n  caches    " + CpuCachesText(caches) + " (L1d and L2 per core)\n"),
            std::string::npos)
      << text.out;

  // No meminfo under the root: memory is unknown (null), not a failure.
  fs::remove(root / "proc/meminfo");
  auto bare = test::RunTessera({"doctor", "--root", root.string(), "--json"}, "", 60000);
  EXPECT_EQ(bare.exit_code, 0) << bare.out;
  EXPECT_TRUE(nlohmann::json::parse(bare.out)["cpu"]["memory_total_bytes"].is_null());
}

class NpuCliModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.File("model");
    SyntheticModelSpec spec;
    spec.layers = 4;
    spec.dtype = DType::kBF16;
    spec.seed = 11;
    ASSERT_TRUE(WriteSyntheticCheckpoint(dir_, spec).ok());
    test::WriteFile(dir_ + "/tokenizer.json", R"({"version":"1.0","added_tokens":[],
      "normalizer":null,"pre_tokenizer":null,"post_processor":null,"decoder":null,
      "model":{"type":"BPE","vocab":{"a":0,"b":1},"merges":[]}})");
  }

  nlohmann::json Generate(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"generate",   "--model",      dir_, "--prompt-ids",
                                     "1,5,9,33,7", "--max-tokens", "20", "--json",
                                     "--dtype",    "bf16"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = test::RunTessera(args, "", 120000);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
  }

  test::TempDir tmp_;
  std::string dir_;
};

TEST_F(NpuCliModel, GenerateWithNpuLayersOnTheFakeDeviceGivesTheCpuTokens) {
  const auto cpu = Generate({});
  for (const char* flag : {"--npu-layers=2", "--npu-percent=100"}) {
    const auto npu = Generate({flag, "--npu-device", "fake:xdna2"});
    EXPECT_EQ(npu["generated_ids"], cpu["generated_ids"]) << flag;
    EXPECT_NE(npu["placement"].get<std::string>().find("xdna#0"), std::string::npos);
  }
}

TEST_F(NpuCliModel, BenchRunsOnTheFakeDeviceAndSaysSo) {
  auto r = test::RunTessera(
      {"bench", "--model", dir_, "--npu-layers", "4", "--prompt-tokens", "8", "--gen-tokens", "4",
       "--repeat", "1", "--json", "--npu-device", "fake:xdna1"},
      "", 120000);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NE(j["placement"].get<std::string>().find("layers 0-3 -> xdna#0, head -> cpu#1"),
            std::string::npos);
  EXPECT_NE(r.err.find("fake xdna1 (CPU reference kernels; no NPU executes anything)"),
            std::string::npos);
}

TEST_F(NpuCliModel, NpuLayersWithoutAnNpuSayWhatToDo) {
  auto r = test::RunTessera(
      {"generate", "--model", dir_, "--prompt-ids", "1,2", "--npu-layers", "1"}, "", 60000);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tessera doctor"), std::string::npos) << r.err;
  auto both = test::RunTessera({"generate", "--model", dir_, "--prompt-ids", "1", "--npu-layers",
                                "1", "--npu-percent", "5"});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("not both"), std::string::npos) << both.err;
}

}  // namespace
}  // namespace tessera
