// `tessera --version` and `tessera version`: version, commit, build, the cpu backend's kernel
// family on this machine (the one DetectCpuIsa, the backend's dispatch point, picks), that
// family's decode prefetch and the cache sizes.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "backend/cpu/cpu_caches.h"
#include "backend/cpu/cpu_features.h"
#include "test_support.h"

namespace tessera {
namespace {

TEST(VersionCli, NamesVersionCommitBuildAndTheCpuKernels) {
  auto r = test::RunTessera({"--version"}, "", 60000);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::regex shape(
      "tessera [0-9]+\\.[0-9]+\\.[0-9]+\n"
      "commit       ([0-9a-f]{7,40}(-dirty)?|unknown)\n"
      "build        (Release|Debug|RelWithDebInfo|MinSizeRel), [A-Za-z]+ [0-9.]+\n"
      "cpu kernels  [a-z0-9]+ \\(this CPU runs [a-z0-9, ]+\\)\n"
      "cpu prefetch (l2-16k|l2-next-tile|nta-next-tile|near-only|none) \\(decode weights\\)\n"
      "cpu caches   L1d ([0-9.]+ [KMG]iB|unknown), L2 ([0-9.]+ [KMG]iB|unknown), "
      "L3 ([0-9.]+ [KMG]iB|unknown)\n");
  EXPECT_TRUE(std::regex_match(r.out, shape)) << r.out;
  const std::string isa(CpuIsaName(DetectCpuIsa()));
  EXPECT_NE(r.out.find("cpu kernels  " + isa + " (this CPU runs " + SupportedCpuIsaNames() + ")"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\ncpu prefetch " + std::string(DecodePrefetchName(DetectCpuIsa())) +
                       " (decode weights)\ncpu caches   " + CpuCachesText(CpuCacheSizes()) + "\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(test::RunTessera({"version"}, "", 60000).out, r.out);
  auto help = test::RunTessera({"version", "--help"}, "", 60000);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("git commit"), std::string::npos) << help.out;
  auto bad = test::RunTessera({"version", "--bogus"}, "", 60000);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--bogus"), std::string::npos) << bad.err;
  // The command list names it.
  EXPECT_NE(test::RunTessera({"--help"}).out.find("version"), std::string::npos);
}

}  // namespace
}  // namespace tessera
