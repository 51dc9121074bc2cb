// Helpers shared by the tests: where the shared data lives, temporary directories, and
// running the tessera binary as a subprocess.
//
//   std::string dir = tessera::test::SharedDir() + "/models/stories260k";
//   tessera::test::TempDir tmp;                     // removed at scope exit
//   auto r = tessera::test::RunTessera({"generate", "--model", dir}, "");
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::test {

// TESSERA_SHARED_DIR if set, else the ../shared beside the source tree.
std::string SharedDir();

// The built tessera CLI (TESSERA_BIN if set, else <build>/apps/tessera).
std::string TesseraBinary();

// A fresh directory under $TMPDIR, deleted recursively on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::string& contents);
std::string ReadFile(const std::string& path);

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;      // the signal that ended it, or 0
  std::string out;
  std::string err;
};

// Runs argv[0..] (argv[0] is the program) with `input` on stdin; captures stdout/stderr.
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& input);
// Runs the tessera binary with the given arguments.
ProcessResult RunTessera(const std::vector<std::string>& args, const std::string& input = "");

// Comparing logits: n token ids below vocab from a seeded generator; the largest |a - b|; the
// fraction of rows ([n][vocab] each) whose arg-max agrees.
std::vector<int32_t> RandomTokens(size_t n, int64_t vocab, uint32_t seed);
double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b);
double Top1Agreement(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab);

}  // namespace tessera::test
