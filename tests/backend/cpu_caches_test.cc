// Cache sizes (cpu_caches.h): the sysfs parser on fake trees, good and broken (a broken file is
// an unknown size, never a crash), the CPUID leaf decoder on known register values, and the
// probe on this machine against its own sysfs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "backend/cpu/cpu_caches.h"
#include "test_support.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

void WriteCache(const fs::path& dir, const std::string& level, const std::string& type,
                const std::string& size) {
  fs::create_directories(dir);
  std::ofstream(dir / "level") << level;
  std::ofstream(dir / "type") << type;
  std::ofstream(dir / "size") << size;
}

TEST(CpuCaches, SysfsSizeTextParses) {
  EXPECT_EQ(ParseSysfsCacheSize("48K\n"), 48 << 10);
  EXPECT_EQ(ParseSysfsCacheSize("2048K"), 2 << 20);
  EXPECT_EQ(ParseSysfsCacheSize("266240K\n"), int64_t{266240} << 10);
  EXPECT_EQ(ParseSysfsCacheSize("1M"), 1 << 20);
  EXPECT_EQ(ParseSysfsCacheSize("1G"), int64_t{1} << 30);
  EXPECT_EQ(ParseSysfsCacheSize("512"), 512);
  for (const char* bad : {"", "\n", "K", "0K", "-1K", "48 K", "48k", "12x", "4.5M", "K48",
                          "99999999999999999999K", "9999999999999G", "9999999999G"}) {
    EXPECT_EQ(ParseSysfsCacheSize(bad), std::nullopt) << bad;
  }
}

TEST(CpuCaches, SysfsTreeGivesTheDataAndUnifiedLevels) {
  test::TempDir tmp;
  const fs::path cache = tmp.File("cache");
  WriteCache(cache / "index0", "1\n", "Data\n", "48K\n");
  WriteCache(cache / "index1", "1\n", "Instruction\n", "32K\n");
  WriteCache(cache / "index2", "2\n", "Unified\n", "2048K\n");
  WriteCache(cache / "index3", "3\n", "Unified\n", "266240K\n");
  const CpuCaches c = ReadSysfsCaches(cache.string());
  EXPECT_EQ(c.l1d_bytes, 48 << 10);
  EXPECT_EQ(c.l2_bytes, 2 << 20);
  EXPECT_EQ(c.l3_bytes, int64_t{266240} << 10);
  EXPECT_EQ(CpuCachesText(c), "L1d 48.0 KiB, L2 2.0 MiB, L3 260.0 MiB");

  // Broken pieces leave their cache unknown and the rest intact.
  std::ofstream(cache / "index2" / "size") << "lots";
  fs::remove(cache / "index3" / "size");
  fs::create_directories(cache / "index4");            // an empty index
  WriteCache(cache / "index5", "9", "Unified", "1M");  // no such level
  WriteCache(cache / "index6", "2", "Mystery", "1M");  // no such type
  WriteCache(cache / "index7", "", "", "");            // empty files
  fs::create_directories(cache / "index8" / "level");  // a directory where a file belongs
  const CpuCaches broken = ReadSysfsCaches(cache.string());
  EXPECT_EQ(broken.l1d_bytes, 48 << 10);
  EXPECT_EQ(broken.l2_bytes, 0);
  EXPECT_EQ(broken.l3_bytes, 0);
  EXPECT_EQ(CpuCachesText(broken), "L1d 48.0 KiB, L2 unknown, L3 unknown");

  const CpuCaches none = ReadSysfsCaches(tmp.File("absent"));
  EXPECT_EQ(none.l1d_bytes, 0);
  EXPECT_EQ(none.l2_bytes, 0);
  EXPECT_EQ(none.l3_bytes, 0);
  // Unknown sizes come from a fallback; known ones stay.
  const CpuCaches filled =
      FillUnknownCaches(broken, {.l1d_bytes = 1, .l2_bytes = 2, .l3_bytes = 3});
  EXPECT_EQ(filled.l1d_bytes, 48 << 10);
  EXPECT_EQ(filled.l2_bytes, 2);
  EXPECT_EQ(filled.l3_bytes, 3);
}

// CPUID leaf 4 / 0x8000001D subleaves: EAX type (bits 4:0) and level (7:5); EBX ways - 1
// (31:22), partitions - 1 (21:12), line size - 1 (11:0); ECX sets - 1.
TEST(CpuCaches, CpuidLeavesDecode) {
  const std::vector<std::array<uint32_t, 3>> leaves = {
      {0x21, (11u << 22) | 63u, 63},      // L1 data: 12 ways x 64 B x 64 sets = 48 KiB
      {0x22, (7u << 22) | 63u, 63},       // L1 instruction: ignored
      {0x43, (15u << 22) | 63u, 2047},    // L2 unified: 16 x 64 x 2048 = 2 MiB
      {0x63, (19u << 22) | 63u, 212991},  // L3 unified: 20 x 64 x 212992 = 260 MiB
      {0, 0, 0},                          // the end
      {0x63, (0u << 22) | 63u, 0},        // past the end: ignored
  };
  const CpuCaches c = CachesFromCpuidLeaves(leaves);
  EXPECT_EQ(c.l1d_bytes, 48 << 10);
  EXPECT_EQ(c.l2_bytes, 2 << 20);
  EXPECT_EQ(c.l3_bytes, int64_t{260} << 20);
  EXPECT_EQ(CachesFromCpuidLeaves({}).l2_bytes, 0);
}

// This machine: where sysfs describes cpu0's caches, the probe reports its sizes.
TEST(CpuCaches, ThisMachineMatchesItsSysfs) {
  const std::string dir = "/sys/devices/system/cpu/cpu0/cache";
  const CpuCaches probed = CpuCacheSizes();
  const CpuCaches sysfs = ReadSysfsCaches(dir);
  if (sysfs.l1d_bytes == 0 && sysfs.l2_bytes == 0 && sysfs.l3_bytes == 0) {
    GTEST_SKIP() << "no cache sizes under " << dir;
  }
  // Each size sysfs knows is the probe's (a 0 there may come from CPUID instead).
  EXPECT_EQ(sysfs.l1d_bytes > 0 ? probed.l1d_bytes : 0, sysfs.l1d_bytes);
  EXPECT_EQ(sysfs.l2_bytes > 0 ? probed.l2_bytes : 0, sysfs.l2_bytes);
  EXPECT_EQ(sysfs.l3_bytes > 0 ? probed.l3_bytes : 0, sysfs.l3_bytes);
  std::printf("[ measured ] %s\n", CpuCachesText(probed).c_str());
}

}  // namespace
}  // namespace tessera
