// The README's CLI table against the binary: every command's synopsis names exactly the flags
// its --help lists, so the table cannot drift from the options (issue #44 found five missing).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "test_support.h"

namespace tessera {
namespace {

std::set<std::string> FlagsIn(const std::string& text, const std::regex& pattern) {
  std::set<std::string> flags;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern);
       it != std::sregex_iterator(); ++it) {
    flags.insert((*it)[1].str());
  }
  return flags;
}

std::string Joined(const std::set<std::string>& flags) {
  std::string out;
  for (const auto& f : flags) out += (out.empty() ? "" : " ") + f;
  return out;
}

TEST(ReadmeCli, EverySynopsisNamesTheFlagsOfItsHelp) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in) << "cannot read README.md";
  // The first table row of each command: | `tessera CMD ...` | description |
  const std::regex row(R"(^\| `tessera ([a-z-]+)([^`]*)` \|)");
  std::map<std::string, std::string> synopsis;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row) && !synopsis.count(m[1].str())) {
      synopsis[m[1].str()] = m[2].str();
    }
  }
  ASSERT_GE(synopsis.size(), 10u);
  const std::regex in_synopsis(R"((--[a-z0-9-]+))");
  const std::regex in_help(R"((?:^|\n)\s+(--[a-z0-9-]+))");
  for (const auto& [command, text] : synopsis) {
    SCOPED_TRACE(command);
    auto r = test::RunTessera({command, "--help"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::set<std::string> help = FlagsIn(r.out + r.err, in_help);
    const std::set<std::string> readme = FlagsIn(text, in_synopsis);
    std::set<std::string> missing, extra;
    for (const auto& f : help) {
      if (!readme.count(f)) missing.insert(f);
    }
    for (const auto& f : readme) {
      if (!help.count(f)) extra.insert(f);
    }
    EXPECT_TRUE(missing.empty()) << "README synopsis lacks: " << Joined(missing);
    EXPECT_TRUE(extra.empty()) << "README synopsis has flags --help does not: " << Joined(extra);
  }
}

}  // namespace
}  // namespace tessera
