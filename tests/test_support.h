// Helpers shared by the tests: where the shared data lives, temporary directories, and
// running the tessera binary as a subprocess.
//
//   std::string dir = tessera::test::SharedDir() + "/models/stories260k";
//   tessera::test::TempDir tmp;                     // removed at scope exit
//   auto r = tessera::test::RunTessera({"generate", "--model", dir}, "");
//
// Tests leave the shared data untouched: every child sees it as read-only by policy
// (ChildEnvironment), and ctest points TESSERA_MODELS into the build tree.
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
  int exit_code = -1;      // -1 when killed by a signal
  int signal = 0;          // the signal that ended it, or 0
  bool timed_out = false;  // killed (with its process group) when the time limit ran out
  std::string out;
  std::string err;
};

// The environment RunProcess gives a child: this process's, with SharedDir() added to
// TESSERA_READ_ONLY_DIRS. Shared data is read-only by policy even where the filesystem lets a
// test write there, so a package converted from it on first use goes to $TESSERA_MODELS.
std::vector<std::string> ChildEnvironment();

// Runs argv[0..] (argv[0] is the program) with `input` on stdin; captures stdout/stderr.
// timeout_ms > 0 bounds the run: the child runs in a process group of its own, and when it has
// not finished by then the whole group is killed (SIGKILL) and timed_out is set, so a test of
// something that must exit cannot hang if it does not.
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& input,
                         int timeout_ms = 0);
// Runs the tessera binary with the given arguments.
ProcessResult RunTessera(const std::vector<std::string>& args, const std::string& input = "",
                         int timeout_ms = 0);

// Comparing logits: n token ids below vocab from a seeded generator; the largest |a - b|; the
// fraction of rows ([n][vocab] each) whose arg-max agrees.
std::vector<int32_t> RandomTokens(size_t n, int64_t vocab, uint32_t seed);
double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b);
double Top1Agreement(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab);

}  // namespace tessera::test
