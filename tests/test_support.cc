#include "test_support.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace tessera::test {

std::string SharedDir() {
  const char* env = std::getenv("TESSERA_SHARED_DIR");
  if (env != nullptr && *env != '\0') return env;
  return TESSERA_SHARED_DIR_DEFAULT;
}

std::string TesseraBinary() {
  const char* env = std::getenv("TESSERA_BIN");
  if (env != nullptr && *env != '\0') return env;
  return std::string(TESSERA_BINARY_DIR) + "/apps/tessera";
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/tessera-test-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  // Convert-on-first-use writes packages beside a writable source (<dir>.tessera-<format>);
  // a test that ran a checkpoint here as its source leaves them next to this directory.
  const std::filesystem::path self(path_);
  const std::string prefix = self.filename().string() + ".tessera-";
  std::filesystem::directory_iterator it(self.parent_path(), ec), end;
  std::vector<std::filesystem::path> packages;
  for (; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind(prefix, 0) == 0) packages.push_back(it->path());
  }
  for (const auto& p : packages) std::filesystem::remove_all(p, ec);
}

std::vector<std::string> ChildEnvironment() {
  std::vector<std::string> env;
  std::string read_only = SharedDir();
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.starts_with("TESSERA_READ_ONLY_DIRS=")) {
      const std::string listed = entry.substr(entry.find('=') + 1);
      if (!listed.empty()) read_only += ":" + listed;
    } else {
      env.push_back(entry);
    }
  }
  env.push_back("TESSERA_READ_ONLY_DIRS=" + read_only);
  // The user's own Ollama store never shows up in a test (a test that wants one sets it).
  if (std::getenv("OLLAMA_MODELS") == nullptr) {
    env.push_back(std::string("OLLAMA_MODELS=") + TESSERA_BINARY_DIR + "/test-ollama-models");
  }
  return env;
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw std::runtime_error("cannot write " + path);
  f.write(contents.data(), static_cast<std::streamsize>(contents.size()));
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& input,
                         int timeout_ms) {
  ::signal(SIGPIPE, SIG_IGN);  // a child that exits early must not kill the test
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) || ::pipe2(out_pipe, O_CLOEXEC) || ::pipe2(err_pipe, O_CLOEXEC)) {
    throw std::runtime_error("pipe failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // With a time limit the child leads a process group of its own, so that everything it starts
  // (a server's worker, say) can be killed with it.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (timeout_ms > 0) {
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto ms_left = [&] {  // for poll: -1 (no limit) or what is left, at least 0
    if (timeout_ms <= 0) return -1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<int64_t>(0, left.count()));
  };
  const std::vector<std::string> env_strings = ChildEnvironment();
  std::vector<char*> env;
  for (const auto& e : env_strings) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(in_pipe[1]);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  ProcessResult result;
  size_t written = 0;
  int in_fd = in_pipe[1];
  if (input.empty()) {
    ::close(in_fd);
    in_fd = -1;
  }
  int open_fds = 2;
  bool out_open = true, err_open = true;
  char buf[65536];
  while (open_fds > 0 || in_fd >= 0) {
    pollfd fds[3];
    int n = 0;
    int out_idx = -1, err_idx = -1, in_idx = -1;
    if (out_open) {
      fds[n] = {out_pipe[0], POLLIN, 0};
      out_idx = n++;
    }
    if (err_open) {
      fds[n] = {err_pipe[0], POLLIN, 0};
      err_idx = n++;
    }
    if (in_fd >= 0) {
      fds[n] = {in_fd, POLLOUT, 0};
      in_idx = n++;
    }
    const int ready = ::poll(fds, n, ms_left());
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (ready == 0 && ms_left() == 0) {
      ::kill(-pid, SIGKILL);
      result.timed_out = true;
      break;
    }
    auto drain = [&](int idx, int fd, bool* open, std::string* dst) {
      if (idx < 0 || !(fds[idx].revents & (POLLIN | POLLHUP | POLLERR))) return;
      ssize_t r = ::read(fd, buf, sizeof(buf));
      if (r > 0) {
        dst->append(buf, static_cast<size_t>(r));
      } else if (r == 0 || errno != EINTR) {
        *open = false;
        --open_fds;
      }
    };
    drain(out_idx, out_pipe[0], &out_open, &result.out);
    drain(err_idx, err_pipe[0], &err_open, &result.err);
    if (in_idx >= 0 && (fds[in_idx].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t w = ::write(in_fd, input.data() + written, input.size() - written);
      if (w > 0) written += static_cast<size_t>(w);
      if (w < 0 && errno != EINTR && errno != EAGAIN) written = input.size();
      if (written >= input.size()) {
        ::close(in_fd);
        in_fd = -1;
      }
    }
  }
  if (in_fd >= 0) ::close(in_fd);
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  if (timeout_ms > 0 && !result.timed_out) {
    // Its output is closed, but the child may still run: wait for its exit within the limit
    // too (a pidfd becomes readable when the process ends).
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd >= 0) {
      pollfd exited{pidfd, POLLIN, 0};
      int r;
      while ((r = ::poll(&exited, 1, ms_left())) < 0 && errno == EINTR) {
      }
      if (r == 0) {
        ::kill(-pid, SIGKILL);
        result.timed_out = true;
      }
      ::close(pidfd);
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

ProcessResult RunTessera(const std::vector<std::string>& args, const std::string& input,
                         int timeout_ms) {
  std::vector<std::string> argv{TesseraBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, input, timeout_ms);
}

std::vector<int32_t> RandomTokens(size_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (std::isnan(d)) return INFINITY;  // std::max would keep m: a NaN must not compare equal
    m = std::max(m, d);
  }
  return m;
}

double Top1Agreement(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab) {
  const size_t n = a.size() / static_cast<size_t>(vocab);
  size_t same = 0;
  for (size_t t = 0; t < n; ++t) {
    auto ra = a.begin() + static_cast<ptrdiff_t>(t * vocab),
         rb = b.begin() + static_cast<ptrdiff_t>(t * vocab);
    same += std::max_element(ra, ra + vocab) - ra == std::max_element(rb, rb + vocab) - rb;
  }
  return static_cast<double>(same) / static_cast<double>(n);
}

}  // namespace tessera::test
