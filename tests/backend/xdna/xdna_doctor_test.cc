// Doctor on fake filesystem trees the tests build: each NPU generation, each broken setup and
// junk sysfs contents give the right verdict and remedy. Nothing here reads the real /sys.
#include "backend/xdna/doctor.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

// What a fake machine has; the defaults are a healthy Strix Halo.
struct TreeSpec {
  std::string vendor = "0x1022\n";
  std::string device = "0x17f0\n";
  std::string revision = "0x11\n";
  std::string vbnv = "RyzenAI-npu5\n";  // empty: no attribute
  std::string fw_version = "1.1.2.65\n";
  std::string firmware_dir = "17f0_11";  // where npu.sbin is written; empty: nowhere
  std::string driver = "amdxdna";        // the bound driver; empty: none (and no accel node)
  bool module_loaded = true;
  std::string module_version = "2.19.0_20250101\n";  // empty: no version file (in-tree)
  std::string tdr_timeout_ms = "2000\n";             // empty: no parameter
  std::string cmdline = "BOOT_IMAGE=/vmlinuz root=/dev/nvme0n1p2 ro quiet\n";
  bool iommu = true;        // sys/class/iommu/ivhd0 and the device's iommu_group
  mode_t node_mode = 0660;  // /dev/accel/accel0; 0: no node
  std::vector<std::string> xrt_libs = {"opt/xilinx/xrt/lib/libxrt_coreutil.so.2.19.0",
                                       "opt/xilinx/xrt/lib/libxrt_driver_xdna.so.2.19.0"};
};

constexpr char kBdf[] = "0000:c5:00.1";

class DoctorTest : public ::testing::Test {
 protected:
  void Write(const std::string& rel, const std::string& contents) {
    fs::path path = fs::path(tmp_.path()) / rel;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << contents;
  }
  void Link(const std::string& target, const std::string& rel) {
    fs::path path = fs::path(tmp_.path()) / rel;
    fs::create_directories(path.parent_path());
    fs::create_symlink(target, path);
  }
  void Mkdir(const std::string& rel) { fs::create_directories(fs::path(tmp_.path()) / rel); }
  std::string Root() const { return tmp_.path(); }

  // The PCI device directory relative to root.
  static std::string Pci() { return std::string("sys/devices/pci0000:00/0000:00:08.2/") + kBdf; }

  void Build(const TreeSpec& s) {
    std::string pci = Pci();
    Write(pci + "/vendor", s.vendor);
    Write(pci + "/device", s.device);
    Write(pci + "/revision", s.revision);
    Write(pci + "/class", "0x118000\n");
    Link("../../../devices/pci0000:00/0000:00:08.2/" + std::string(kBdf),
         std::string("sys/bus/pci/devices/") + kBdf);
    if (!s.driver.empty()) {
      Mkdir("sys/bus/pci/drivers/" + s.driver);
      Link("../../../../bus/pci/drivers/" + s.driver, pci + "/driver");
      Link("../../devices/pci0000:00/0000:00:08.2/" + std::string(kBdf) + "/accel/accel0",
           "sys/class/accel/accel0");
      Link("../../../" + std::string(kBdf), pci + "/accel/accel0/device");
      if (!s.vbnv.empty()) Write(pci + "/vbnv", s.vbnv);
      if (!s.fw_version.empty()) Write(pci + "/fw_version", s.fw_version);
      if (s.node_mode != 0) {
        Write("dev/accel/accel0", "");
        ::chmod((Root() + "/dev/accel/accel0").c_str(), s.node_mode);
      }
    }
    if (s.module_loaded) {
      Mkdir("sys/module/amdxdna");
      if (!s.module_version.empty()) Write("sys/module/amdxdna/version", s.module_version);
      if (!s.tdr_timeout_ms.empty()) {
        Write("sys/module/amdxdna/parameters/tdr_timeout_ms", s.tdr_timeout_ms);
      }
    }
    if (!s.firmware_dir.empty()) {
      Write("lib/firmware/amdnpu/" + s.firmware_dir + "/npu.sbin", std::string(64, '\x5a'));
    }
    Write("proc/cmdline", s.cmdline);
    if (s.iommu) {
      Mkdir("sys/kernel/iommu_groups/7");
      Link("../../../../kernel/iommu_groups/7", pci + "/iommu_group");
      Link("../../devices/pci0000:00/0000:00:00.2/iommu/ivhd0", "sys/class/iommu/ivhd0");
    }
    for (const std::string& lib : s.xrt_libs)
      Write(lib,
            "\x7f"
            "ELF");
    struct stat st {};
    ::stat((Root() + "/proc/cmdline").c_str(), &st);
    node_gid_ = st.st_gid;
    owner_uid_ = st.st_uid;
    // The fixture's files belong to whoever runs the test; the group file names that group
    // "render", and the user the checks judge is someone else who is in it.
    Write("etc/group", "render:x:" + std::to_string(node_gid_) +
                           ":\nusers:x:" + std::to_string(node_gid_ + 1) + ":\n");
  }

  DoctorOptions Options() const {
    DoctorOptions o;
    o.root = Root();
    o.memlock_limit = kMemlockUnlimited;
    o.uid = owner_uid_ == 4242 ? 4243 : 4242;
    o.gids = std::vector<uint32_t>{node_gid_ + 1, node_gid_};  // users, render
    return o;
  }

  static const DoctorCheck& Check(const DoctorReport& r, const std::string& name) {
    const DoctorCheck* c = r.Find(name);
    if (c == nullptr) {
      static DoctorCheck missing{"missing", CheckStatus::kFail, "", ""};
      ADD_FAILURE() << "no check named " << name;
      return missing;
    }
    return *c;
  }

  static void ExpectAllPass(const DoctorReport& r) {
    ASSERT_EQ(r.checks.size(), DoctorCheckNames().size());
    for (const DoctorCheck& c : r.checks) {
      EXPECT_EQ(c.status, CheckStatus::kPass) << c.name << ": " << c.detail << " / fix: " << c.fix;
      EXPECT_TRUE(c.fix.empty()) << c.name;
    }
    EXPECT_TRUE(r.ok());
  }

  test::TempDir tmp_;
  uint32_t node_gid_ = 0;
  uint32_t owner_uid_ = 0;
};

struct Generation {
  const char* label;
  const char* device;
  const char* revision;
  const char* vbnv;
  const char* firmware_dir;
  XdnaGeneration generation;
  const char* name;
  int columns;
};

class DoctorGenerationTest : public DoctorTest, public ::testing::WithParamInterface<Generation> {};

TEST_P(DoctorGenerationTest, HealthyTreeIsIdentifiedAndEveryCheckPasses) {
  const Generation& g = GetParam();
  TreeSpec s;
  s.device = g.device;
  s.revision = g.revision;
  s.vbnv = g.vbnv;
  s.firmware_dir = g.firmware_dir;
  Build(s);
  DoctorReport r = RunDoctor(Options());
  ASSERT_EQ(r.devices.size(), 1u);
  const NpuDevice& d = r.devices[0];
  ASSERT_TRUE(d.generation.has_value());
  EXPECT_EQ(*d.generation, g.generation);
  EXPECT_EQ(d.name, g.name);
  EXPECT_EQ(d.columns, g.columns);
  EXPECT_EQ(d.accel, "accel0");
  EXPECT_EQ(d.pci_address, kBdf);
  EXPECT_EQ(d.fw_version, "1.1.2.65");
  EXPECT_EQ(d.driver, "amdxdna");
  EXPECT_EQ(d.driver_version, "2.19.0_20250101");
  EXPECT_EQ(d.firmware_file, std::string("lib/firmware/amdnpu/") + g.firmware_dir + "/npu.sbin");
  EXPECT_TRUE(r.unsupported.empty());
  ASSERT_TRUE(r.tdr_timeout_ms.has_value());
  EXPECT_EQ(*r.tdr_timeout_ms, 2000);
  ExpectAllPass(r);
}

INSTANTIATE_TEST_SUITE_P(
    AllNpus, DoctorGenerationTest,
    ::testing::Values(Generation{"Phoenix", "0x1502\n", "0x00\n", "RyzenAI-npu1\n", "1502_00",
                                 XdnaGeneration::kXdna1, "Phoenix / Hawk Point", 4},
                      Generation{"PhoenixNoVbnv", "0x1502\n", "0x00\n", "", "1502_00",
                                 XdnaGeneration::kXdna1, "Phoenix / Hawk Point", 4},
                      // Only a board name can tell Hawk Point from Phoenix: same id, same revision.
                      Generation{"HawkPoint", "0x1502\n", "0x00\n", "NPU Hawk Point\n", "1502_00",
                                 XdnaGeneration::kXdna1, "Hawk Point", 4},
                      Generation{"StrixPoint", "0x17f0\n", "0x10\n", "NPU Strix\n", "17f0_10",
                                 XdnaGeneration::kXdna2, "Strix Point", 8},
                      Generation{"StrixHalo", "0x17f0\n", "0x11\n", "RyzenAI-npu5\n", "17f0_11",
                                 XdnaGeneration::kXdna2, "Strix Halo", 8},
                      // Krackan (rev 0x20) loads Strix Point's firmware directory.
                      Generation{"Krackan", "0x17f0\n", "0x20\n", "NPU Krackan 1\n", "17f0_10",
                                 XdnaGeneration::kXdna2, "Krackan", 8}),
    [](const ::testing::TestParamInfo<Generation>& info) { return info.param.label; });

TEST_F(DoctorTest, InTreeDriverHasNoVersionFileAndSaysSo) {
  TreeSpec s;
  s.module_version = "";
  s.tdr_timeout_ms = "";
  Build(s);
  Write("proc/sys/kernel/osrelease", "6.14.0-15-generic\n");
  DoctorReport r = RunDoctor(Options());
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0].driver_version, "in-tree");
  EXPECT_EQ(Check(r, "driver").status, CheckStatus::kPass);
  EXPECT_NE(Check(r, "driver").detail.find("in-tree"), std::string::npos);
  EXPECT_NE(Check(r, "driver").detail.find("6.14.0"), std::string::npos);
  EXPECT_FALSE(r.tdr_timeout_ms.has_value());
}

TEST_F(DoctorTest, KrackanFirmwareOnlyInItsOwnRevisionDirIsMissing) {
  TreeSpec s;
  s.revision = "0x20\n";
  s.firmware_dir = "17f0_20";  // the driver looks in 17f0_10
  s.fw_version = "";
  Build(s);
  DoctorReport r = RunDoctor(Options());
  const DoctorCheck& fw = Check(r, "firmware");
  EXPECT_EQ(fw.status, CheckStatus::kFail);
  EXPECT_NE(fw.detail.find("amdnpu/17f0_10"), std::string::npos) << fw.detail;
  EXPECT_NE(fw.fix.find("/lib/firmware/amdnpu/17f0_10/npu.sbin"), std::string::npos) << fw.fix;
  EXPECT_FALSE(r.ok());
}

TEST_F(DoctorTest, CompressedAndNewProtocolFirmwareFilesCount) {
  for (const char* file : {"npu.sbin.zst", "npu_7.sbin"}) {
    TreeSpec s;
    s.firmware_dir = "";
    Build(s);
    Write(std::string("lib/firmware/amdnpu/17f0_11/") + file, "zzzz");
    DoctorReport r = RunDoctor(Options());
    EXPECT_EQ(Check(r, "firmware").status, CheckStatus::kPass) << file;
    ASSERT_EQ(r.devices.size(), 1u);
    EXPECT_EQ(r.devices[0].firmware_file, std::string("lib/firmware/amdnpu/17f0_11/") + file);
    fs::remove_all(Root());
    fs::create_directories(Root());
  }
}

TEST_F(DoctorTest, NoDriverBoundIsFoundOnThePciBusAndFailsWithModprobe) {
  TreeSpec s;
  s.driver = "";
  s.module_loaded = false;
  Build(s);
  DoctorReport r = RunDoctor(Options());
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0].name, "Strix Halo");
  EXPECT_TRUE(r.devices[0].accel.empty());
  const DoctorCheck& driver = Check(r, "driver");
  EXPECT_EQ(driver.status, CheckStatus::kFail);
  EXPECT_NE(driver.detail.find("not loaded"), std::string::npos) << driver.detail;
  EXPECT_NE(driver.fix.find("sudo modprobe amdxdna"), std::string::npos) << driver.fix;
  EXPECT_EQ(Check(r, "device_access").status, CheckStatus::kFail);
  EXPECT_FALSE(r.ok());
}

TEST_F(DoctorTest, ModuleLoadedButNotBoundPointsAtDmesg) {
  TreeSpec s;
  s.driver = "";
  Build(s);
  DoctorReport r = RunDoctor(Options());
  const DoctorCheck& driver = Check(r, "driver");
  EXPECT_EQ(driver.status, CheckStatus::kFail);
  EXPECT_NE(driver.detail.find("loaded but not bound"), std::string::npos) << driver.detail;
  EXPECT_NE(driver.fix.find("modprobe amdxdna"), std::string::npos);
  EXPECT_NE(driver.fix.find("dmesg"), std::string::npos);
}

TEST_F(DoctorTest, BoundToAnotherDriverSaysHowToUnbind) {
  TreeSpec s;
  s.driver = "vfio-pci";
  Build(s);
  DoctorReport r = RunDoctor(Options());
  const DoctorCheck& driver = Check(r, "driver");
  EXPECT_EQ(driver.status, CheckStatus::kFail);
  EXPECT_NE(driver.detail.find("vfio-pci"), std::string::npos);
  EXPECT_NE(driver.fix.find("/sys/bus/pci/drivers/vfio-pci/unbind"), std::string::npos);
  EXPECT_NE(driver.fix.find("modprobe amdxdna"), std::string::npos);
}

TEST_F(DoctorTest, IommuOffOnTheCommandLineFails) {
  for (const char* flag : {"amd_iommu=off", "iommu=off"}) {
    TreeSpec s;
    s.cmdline = std::string("BOOT_IMAGE=/vmlinuz ro ") + flag + " quiet\n";
    Build(s);
    DoctorReport r = RunDoctor(Options());
    const DoctorCheck& iommu = Check(r, "iommu");
    EXPECT_EQ(iommu.status, CheckStatus::kFail) << flag;
    EXPECT_NE(iommu.fix.find(std::string("remove ") + flag), std::string::npos) << iommu.fix;
    EXPECT_NE(iommu.fix.find("kernel command line"), std::string::npos);
    EXPECT_FALSE(r.ok());
    fs::remove_all(Root());
    fs::create_directories(Root());
  }
}

TEST_F(DoctorTest, SimilarCommandLineOptionsDoNotTripTheIommuCheck) {
  TreeSpec s;
  s.cmdline = "ro iommu=pt amd_iommu=on xamd_iommu=off\n";
  Build(s);
  EXPECT_EQ(Check(RunDoctor(Options()), "iommu").status, CheckStatus::kPass);
}

TEST_F(DoctorTest, NoIommuGroupOrUnitFails) {
  TreeSpec s;
  s.iommu = false;
  Build(s);
  DoctorReport r = RunDoctor(Options());
  const DoctorCheck& iommu = Check(r, "iommu");
  EXPECT_EQ(iommu.status, CheckStatus::kFail);
  EXPECT_NE(iommu.detail.find("no iommu_group"), std::string::npos) << iommu.detail;
  EXPECT_NE(iommu.detail.find("sys/class/iommu is empty"), std::string::npos) << iommu.detail;
  EXPECT_NE(iommu.fix.find("enable the IOMMU"), std::string::npos);
}

TEST_F(DoctorTest, MemlockBelowModelPlusHeadroomFails) {
  Build(TreeSpec{});
  DoctorOptions o = Options();
  o.model_bytes = 1ull << 30;
  o.memlock_limit = 64ull << 20;
  DoctorReport r = RunDoctor(o);
  const DoctorCheck& memlock = Check(r, "memlock");
  EXPECT_EQ(memlock.status, CheckStatus::kFail);
  EXPECT_NE(memlock.detail.find("1536.0 MiB"), std::string::npos) << memlock.detail;
  EXPECT_NE(memlock.fix.find("/etc/security/limits.d/99-amdxdna.conf"), std::string::npos);
  EXPECT_NE(memlock.fix.find("memlock unlimited"), std::string::npos);
  EXPECT_FALSE(r.ok());
}

TEST_F(DoctorTest, MemlockBoundaryAndUnlimited) {
  Build(TreeSpec{});
  DoctorOptions o = Options();
  o.model_bytes = 300ull << 20;
  const uint64_t need = (300ull << 20) + (512ull << 20);
  o.memlock_limit = need;
  EXPECT_EQ(Check(RunDoctor(o), "memlock").status, CheckStatus::kPass);
  o.memlock_limit = need - 1;
  EXPECT_EQ(Check(RunDoctor(o), "memlock").status, CheckStatus::kFail);
  o.memlock_limit = kMemlockUnlimited;
  o.model_bytes = UINT64_MAX;  // saturates instead of wrapping
  EXPECT_EQ(Check(RunDoctor(o), "memlock").status, CheckStatus::kPass);
  o.memlock_limit = 8ull << 20;  // a common default; no model still needs the headroom
  o.model_bytes = 0;
  EXPECT_EQ(Check(RunDoctor(o), "memlock").status, CheckStatus::kFail);
}

TEST_F(DoctorTest, RootOnlyDeviceNodeNeedsUdevRuleAndRenderGroup) {
  TreeSpec s;
  s.node_mode = 0600;
  Build(s);
  DoctorOptions o = Options();
  o.gids = std::vector<uint32_t>{node_gid_ + 1};  // not in render
  DoctorReport r = RunDoctor(o);
  const DoctorCheck& access = Check(r, "device_access");
  EXPECT_EQ(access.status, CheckStatus::kFail);
  EXPECT_NE(access.detail.find("mode 0600"), std::string::npos) << access.detail;
  EXPECT_NE(access.fix.find("/etc/udev/rules.d/99-amdxdna.rules"), std::string::npos);
  EXPECT_NE(access.fix.find("SUBSYSTEM==\"accel\", KERNEL==\"accel*\", GROUP=\"render\", "
                            "MODE=\"0660\""),
            std::string::npos)
      << access.fix;
  EXPECT_NE(access.fix.find("sudo usermod -aG render $USER"), std::string::npos);
  EXPECT_FALSE(r.ok());
}

TEST_F(DoctorTest, RenderGroupNodeNeedsOnlyGroupMembership) {
  Build(TreeSpec{});  // 0660, group render
  DoctorOptions o = Options();
  o.gids = std::vector<uint32_t>{node_gid_ + 1};
  const DoctorCheck access = Check(RunDoctor(o), "device_access");
  EXPECT_EQ(access.status, CheckStatus::kFail);
  EXPECT_NE(access.detail.find("not in the render group"), std::string::npos) << access.detail;
  EXPECT_NE(access.fix.find("sudo usermod -aG render $USER"), std::string::npos);
  EXPECT_EQ(access.fix.find("99-amdxdna.rules"), std::string::npos);
}

TEST_F(DoctorTest, DeviceAccessFollowsOwnerGroupOtherBits) {
  TreeSpec s;
  s.node_mode = 0606;  // owner and others rw, group nothing
  Build(s);
  DoctorOptions o = Options();
  // In the group: the group bits apply, even though "other" would allow it.
  EXPECT_EQ(Check(RunDoctor(o), "device_access").status, CheckStatus::kFail);
  o.gids = std::vector<uint32_t>{node_gid_ + 1};
  EXPECT_EQ(Check(RunDoctor(o), "device_access").status, CheckStatus::kPass);
  o.uid = owner_uid_;  // the owner: the owner bits
  o.gids = std::vector<uint32_t>{node_gid_};
  EXPECT_EQ(Check(RunDoctor(o), "device_access").status, CheckStatus::kPass);
  ::chmod((Root() + "/dev/accel/accel0").c_str(), 0000);
  o.uid = 0;  // root opens anything
  EXPECT_EQ(Check(RunDoctor(o), "device_access").status, CheckStatus::kPass);
}

TEST_F(DoctorTest, MissingDeviceNodeFails) {
  TreeSpec s;
  s.node_mode = 0;
  Build(s);
  const DoctorCheck access = Check(RunDoctor(Options()), "device_access");
  EXPECT_EQ(access.status, CheckStatus::kFail);
  EXPECT_NE(access.detail.find("/dev/accel/accel0 does not exist"), std::string::npos);
  EXPECT_NE(access.fix.find("udev"), std::string::npos);
}

TEST_F(DoctorTest, XrtPluginVersionMismatchFails) {
  TreeSpec s;
  s.xrt_libs = {"opt/xilinx/xrt/lib/libxrt_coreutil.so.2.19.0",
                "opt/xilinx/xrt/lib/libxrt_coreutil.so.2",
                "opt/xilinx/xrt/lib/libxrt_driver_xdna.so.2.18.0"};
  Build(s);
  DoctorReport r = RunDoctor(Options());
  const DoctorCheck& xrt = Check(r, "xrt");
  EXPECT_EQ(xrt.status, CheckStatus::kFail);
  EXPECT_NE(xrt.detail.find("2.18.0"), std::string::npos) << xrt.detail;
  EXPECT_NE(xrt.detail.find("does not match XRT 2.19.0"), std::string::npos) << xrt.detail;
  EXPECT_NE(xrt.fix.find("xrt_plugin-amdxdna"), std::string::npos);
  EXPECT_NE(xrt.fix.find("2.17"), std::string::npos);
  EXPECT_FALSE(r.ok());
}

TEST_F(DoctorTest, PluginPatchLevelMayDiffer) {
  TreeSpec s;
  s.xrt_libs = {"opt/xilinx/xrt/lib/libxrt_coreutil.so.2.19.0",
                "opt/xilinx/xrt/lib/libxrt_driver_xdna.so.2.19.3"};
  Build(s);
  EXPECT_EQ(Check(RunDoctor(Options()), "xrt").status, CheckStatus::kPass);
}

TEST_F(DoctorTest, DebianXrt213OnlyFailsWithTheReason) {
  TreeSpec s;
  s.xrt_libs = {"usr/lib/x86_64-linux-gnu/libxrt_coreutil.so.2.13.0",
                "usr/lib/x86_64-linux-gnu/libxrt_coreutil.so.2"};
  Build(s);
  DoctorReport r = RunDoctor(Options());
  const DoctorCheck& xrt = Check(r, "xrt");
  EXPECT_EQ(xrt.status, CheckStatus::kFail);
  EXPECT_NE(xrt.detail.find("2.13.0"), std::string::npos) << xrt.detail;
  EXPECT_NE(xrt.detail.find("older than 2.17"), std::string::npos);
  EXPECT_NE(xrt.detail.find("Debian 12"), std::string::npos);
  EXPECT_NE(xrt.fix.find("xrt_plugin-amdxdna >= 2.17"), std::string::npos) << xrt.fix;
}

TEST_F(DoctorTest, NoXrtOrNoPluginFails) {
  TreeSpec s;
  s.xrt_libs = {};
  Build(s);
  const DoctorCheck none = Check(RunDoctor(Options()), "xrt");
  EXPECT_EQ(none.status, CheckStatus::kFail);
  EXPECT_NE(none.detail.find("no XRT"), std::string::npos);
  Write("opt/xilinx/xrt/lib/libxrt_coreutil.so.2.20.1", "x");
  const DoctorCheck no_plugin = Check(RunDoctor(Options()), "xrt");
  EXPECT_EQ(no_plugin.status, CheckStatus::kFail);
  EXPECT_NE(no_plugin.detail.find("no NPU plugin"), std::string::npos) << no_plugin.detail;
}

TEST_F(DoctorTest, MatchingXrtBesideDebiansOldOneWarns) {
  TreeSpec s;
  s.xrt_libs.push_back("usr/lib/x86_64-linux-gnu/libxrt_coreutil.so.2.13.0");
  Build(s);
  const DoctorCheck xrt = Check(RunDoctor(Options()), "xrt");
  EXPECT_EQ(xrt.status, CheckStatus::kWarn);
  EXPECT_NE(xrt.detail.find("also XRT 2.13.0"), std::string::npos) << xrt.detail;
  EXPECT_NE(xrt.fix.find("setup.sh"), std::string::npos);
}

// A missing NPU is information, not a failure: the CPU backend runs (issue #44, item 7).
TEST_F(DoctorTest, NoNpuAtAllIsInformationAndTheCpuFallback) {
  Write("proc/cmdline", "ro quiet\n");
  DoctorReport r = RunDoctor(Options());
  EXPECT_TRUE(r.devices.empty());
  EXPECT_TRUE(r.unsupported.empty());
  ASSERT_EQ(r.checks.size(), DoctorCheckNames().size());
  for (size_t i = 0; i < r.checks.size(); ++i) EXPECT_EQ(r.checks[i].name, DoctorCheckNames()[i]);
  const DoctorCheck& present = Check(r, "npu_present");
  EXPECT_EQ(present.status, CheckStatus::kInfo);
  EXPECT_NE(present.detail.find("no NPU found"), std::string::npos) << present.detail;
  EXPECT_NE(present.fix.find("CPU backend"), std::string::npos) << present.fix;
  for (size_t i = 1; i < r.checks.size(); ++i) {
    EXPECT_EQ(r.checks[i].status, CheckStatus::kInfo) << r.checks[i].name;
    EXPECT_NE(r.checks[i].detail.find("not checked"), std::string::npos);
  }
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(r.tdr_timeout_ms.has_value());
  const std::string text = DoctorReportText(r);
  EXPECT_NE(text.find("npu_present    info"), std::string::npos) << text;
  EXPECT_NE(text.find("0 failed, 0 warnings (no NPU in use: the CPU backend runs every layer)"),
            std::string::npos)
      << text;
  EXPECT_NE(DoctorReportJson(r).find("\"status\": \"info\""), std::string::npos);
}

TEST_F(DoctorTest, UnknownRevisionIsUnsupportedWithAWarn) {
  TreeSpec s;
  s.revision = "0x00\n";  // 17f0 rev 00: the npu2 prototype
  Build(s);
  DoctorReport r = RunDoctor(Options());
  EXPECT_TRUE(r.devices.empty());
  ASSERT_EQ(r.unsupported.size(), 1u);
  EXPECT_EQ(r.unsupported[0].pci_id, "1022:17f0");
  EXPECT_EQ(r.unsupported[0].revision, "0x00");
  const DoctorCheck& present = Check(r, "npu_present");
  EXPECT_EQ(present.status, CheckStatus::kWarn);
  EXPECT_NE(present.detail.find("1022:17f0 rev 0x00"), std::string::npos) << present.detail;
  EXPECT_NE(present.fix.find("CPU backend"), std::string::npos);
  // The other checks need a supported NPU: not run, which is information.
  EXPECT_EQ(Check(r, "driver").status, CheckStatus::kInfo);
  EXPECT_TRUE(r.ok());
}

TEST_F(DoctorTest, AnotherVendorsAccelBesideAnNpuIsIgnoredWithAWarn) {
  Build(TreeSpec{});
  std::string other = "sys/devices/pci0000:00/0000:00:0b.0";
  Write(other + "/vendor", "0x8086\n");
  Write(other + "/device", "0x7d1d\n");
  Write(other + "/revision", "0x04\n");
  Link("../../../" + std::string("0000:00:0b.0"), other + "/accel/accel1/device");
  Link("../../devices/pci0000:00/0000:00:0b.0/accel/accel1", "sys/class/accel/accel1");
  DoctorReport r = RunDoctor(Options());
  ASSERT_EQ(r.devices.size(), 1u);
  ASSERT_EQ(r.unsupported.size(), 1u);
  EXPECT_EQ(r.unsupported[0].pci_id, "8086:7d1d");
  EXPECT_EQ(Check(r, "npu_present").status, CheckStatus::kWarn);
  EXPECT_EQ(Check(r, "driver").status, CheckStatus::kPass);
}

TEST_F(DoctorTest, JunkSysfsContentsGiveClearWarningsNotCrashes) {
  TreeSpec s;
  s.vendor = "garbage\xff\x01\n";
  Build(s);
  DoctorReport r = RunDoctor(Options());
  EXPECT_TRUE(r.devices.empty());
  const DoctorCheck& present = Check(r, "npu_present");
  EXPECT_EQ(present.status, CheckStatus::kWarn);
  EXPECT_NE(present.detail.find("vendor holds 'garbage\\xff\\x01'"), std::string::npos)
      << present.detail;
  // The report stays valid JSON even with those bytes in it.
  EXPECT_FALSE(nlohmann::json::parse(DoctorReportJson(r), nullptr, false).is_discarded());
}

TEST_F(DoctorTest, JunkAttributesBecomeWarnings) {
  TreeSpec s;
  s.fw_version = "";
  s.tdr_timeout_ms = "two seconds\n";
  s.module_version = std::string(5000, 'v');  // over the attribute cap
  Build(s);
  Mkdir(Pci() + "/fw_version");  // a directory where a file should be
  DoctorReport r = RunDoctor(Options());
  ASSERT_EQ(r.devices.size(), 1u);
  const DoctorCheck& fw = Check(r, "firmware");
  EXPECT_EQ(fw.status, CheckStatus::kWarn);
  EXPECT_NE(fw.detail.find("is a directory"), std::string::npos) << fw.detail;
  const DoctorCheck& driver = Check(r, "driver");
  EXPECT_EQ(driver.status, CheckStatus::kWarn);
  EXPECT_NE(driver.detail.find("tdr_timeout_ms unreadable"), std::string::npos) << driver.detail;
  EXPECT_FALSE(r.tdr_timeout_ms.has_value());
  EXPECT_NE(driver.detail.find("larger than 4096 bytes"), std::string::npos) << driver.detail;
  EXPECT_EQ(r.devices[0].driver_version, "");  // an oversized version file is not a version
}

TEST_F(DoctorTest, DanglingAndMisplacedLinksAreNamed) {
  Link("../../../devices/nowhere", "sys/class/accel/accel0/device");
  Mkdir("proc/cmdline");  // a directory: unreadable, not fatal
  Write("sys/bus/pci/devices/0000:01:00.0/vendor", std::string(100000, '1'));
  DoctorReport r = RunDoctor(Options());
  EXPECT_TRUE(r.devices.empty());
  ASSERT_EQ(r.unsupported.size(), 1u);
  const DoctorCheck& present = Check(r, "npu_present");
  EXPECT_EQ(present.status, CheckStatus::kWarn);
  EXPECT_NE(present.detail.find("dangling symlink"), std::string::npos) << present.detail;
}

TEST_F(DoctorTest, JunkGroupFileAndXrtNamesAreSkipped) {
  TreeSpec s;
  s.xrt_libs = {"opt/xilinx/xrt/lib/libxrt_coreutil.so.2.x.0",
                "opt/xilinx/xrt/lib/libxrt_coreutil.so.99999999999.1.0",
                "opt/xilinx/xrt/lib/libxrt_driver_xdna.so..."};
  Build(s);
  Mkdir("opt/xilinx/xrt/lib/libxrt_coreutil.so.2.20.0");  // a directory, not a library
  Write("etc/group", "::::\nrender\nrender:x:notanumber:\n\xff\xfe:x:1:\n");
  DoctorOptions o = Options();
  o.gids = std::vector<uint32_t>{node_gid_ + 1};
  DoctorReport r = RunDoctor(o);
  EXPECT_EQ(Check(r, "xrt").status, CheckStatus::kFail);
  EXPECT_NE(Check(r, "xrt").detail.find("no XRT"), std::string::npos);
  const DoctorCheck& access = Check(r, "device_access");
  EXPECT_EQ(access.status, CheckStatus::kFail);
  EXPECT_NE(access.detail.find("no render group"), std::string::npos) << access.detail;
  EXPECT_NE(access.fix.find("groupadd"), std::string::npos);
}

TEST_F(DoctorTest, JsonIsStableAndFollowsTheSchema) {
  TreeSpec s;
  s.cmdline = "ro amd_iommu=off\n";
  Build(s);
  DoctorOptions o = Options();
  std::string first = DoctorReportJson(RunDoctor(o));
  std::string second = DoctorReportJson(RunDoctor(o));
  EXPECT_EQ(first, second);
  auto parsed = nlohmann::ordered_json::parse(first, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << first;
  ASSERT_TRUE(parsed.is_object());
  std::vector<std::string> top;
  for (auto it = parsed.begin(); it != parsed.end(); ++it) top.push_back(it.key());
  EXPECT_EQ(top, (std::vector<std::string>{"devices", "checks"}));
  ASSERT_EQ(parsed["devices"].size(), 1u);
  const auto& d = parsed["devices"][0];
  std::vector<std::string> device_keys;
  for (auto it = d.begin(); it != d.end(); ++it) device_keys.push_back(it.key());
  EXPECT_EQ(device_keys, (std::vector<std::string>{"pci_id", "revision", "generation", "name",
                                                   "columns", "fw_version", "driver_version"}));
  EXPECT_EQ(d["pci_id"], "1022:17f0");
  EXPECT_EQ(d["revision"], "0x11");
  EXPECT_EQ(d["generation"], "xdna2");
  EXPECT_EQ(d["name"], "Strix Halo");
  EXPECT_EQ(d["columns"], 8);
  EXPECT_EQ(d["fw_version"], "1.1.2.65");
  EXPECT_EQ(d["driver_version"], "2.19.0_20250101");
  const auto& checks = parsed["checks"];
  ASSERT_EQ(checks.size(), 7u);
  const std::vector<std::string> names = {"npu_present",   "driver",  "firmware", "iommu",
                                          "device_access", "memlock", "xrt"};
  for (size_t i = 0; i < checks.size(); ++i) {
    std::vector<std::string> keys;
    for (auto it = checks[i].begin(); it != checks[i].end(); ++it) keys.push_back(it.key());
    EXPECT_EQ(keys, (std::vector<std::string>{"name", "status", "detail", "fix"}));
    EXPECT_EQ(checks[i]["name"], names[i]);
    std::string status = checks[i]["status"];
    EXPECT_TRUE(status == "pass" || status == "info" || status == "warn" || status == "fail")
        << status;
  }
  EXPECT_EQ(checks[3]["status"], "fail");  // iommu
  EXPECT_EQ(checks[0]["status"], "pass");
}

TEST_F(DoctorTest, TextReportShowsDevicesChecksAndFixes) {
  TreeSpec s;
  s.cmdline = "ro iommu=off\n";
  Build(s);
  std::string text = DoctorReportText(RunDoctor(Options()));
  EXPECT_NE(text.find("Strix Halo"), std::string::npos) << text;
  EXPECT_NE(text.find("iommu          fail"), std::string::npos) << text;
  EXPECT_NE(text.find("fix: remove iommu=off"), std::string::npos) << text;
  EXPECT_NE(text.find("1 failed, 0 warnings"), std::string::npos) << text;
}

TEST_F(DoctorTest, DirectoryBytesSumsModelFiles) {
  Write("model/config.json", std::string(100, 'c'));
  Write("model/sub/model.safetensors", std::string(4000, 'w'));
  Link("sub/model.safetensors", "model/weights-link");  // followed, as in the HF cache
  auto bytes = DirectoryBytes(Root() + "/model");
  ASSERT_TRUE(bytes.has_value()) << bytes.status().message();
  EXPECT_EQ(*bytes, 8100u);
  EXPECT_FALSE(DirectoryBytes(Root() + "/no-such-model").has_value());
  EXPECT_FALSE(DirectoryBytes(Root() + "/model/config.json").has_value());
}

}  // namespace
}  // namespace tessera
