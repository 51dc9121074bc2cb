// A Hugging Face hub stand-in for the pull tests: cpp-httplib on 127.0.0.1 (a port the kernel
// picks), serving the two calls tessera makes, with switches for every failure a real
// download meets.
//
//   FakeHub hub;
//   hub.AddModel("org/tiny", kCommit, {{"config.json", "{...}"}, ...});
//   hub.DropConnectionOnce("org/tiny", "model.safetensors", 1000);
//   RunTessera with HF_ENDPOINT=hub.endpoint()
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace httplib {
class Server;
}

namespace tessera::test {

class FakeHub {
 public:
  FakeHub();
  ~FakeHub();
  FakeHub(const FakeHub&) = delete;
  FakeHub& operator=(const FakeHub&) = delete;

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Publishes (or replaces) a repository at `commit`; .safetensors files are listed as LFS
  // with their sha256, the rest with their Git blob id.
  void AddModel(const std::string& repo, const std::string& commit,
                const std::map<std::string, std::string>& files);
  // Serves `bytes` for `file` while the file list keeps describing the published content.
  void ServeInstead(const std::string& repo, const std::string& file, std::string bytes);
  // The next download of `file` stops after `bytes` bytes and the connection is dropped.
  void DropConnectionOnce(const std::string& repo, const std::string& file, size_t bytes);
  // Downloads of `file` send `bytes` bytes and then nothing (until the hub is destroyed).
  void StallAfter(const std::string& repo, const std::string& file, size_t bytes);
  // Every request needs "Authorization: Bearer <token>" (401 otherwise).
  void RequireToken(const std::string& token);
  // The file-list call accepts the request and never answers (until the hub is destroyed).
  void StallFileList() {
    std::lock_guard<std::mutex> lock(mutex_);
    stall_file_list_ = true;
  }
  // Resolve requests for `file` answer 404 (the file list still names it).
  void MissingFile(const std::string& repo, const std::string& file);

  struct Request {
    std::string path;
    std::string range;  // the Range header, if any
  };
  std::vector<Request> requests() const;
  // Body bytes sent for resolve requests so far.
  uint64_t bytes_served() const;

 private:
  struct File {
    std::string published;  // what the file list describes
    std::string served;     // what downloads send
    size_t drop_after = 0;  // > 0: drop the next download after this many bytes
    size_t stall_after = 0;
    bool stall = false;
    bool missing = false;
  };
  struct Repo {
    std::string commit;
    std::map<std::string, File> files;
  };
  File* FindFile(const std::string& repo, const std::string& file);
  void AddBytesServed(uint64_t n);
  void SubtractBytesServed(uint64_t n);

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  mutable std::mutex mutex_;
  std::condition_variable stall_released_;
  bool stopping_ = false;
  std::string token_;
  bool stall_file_list_ = false;
  std::map<std::string, Repo> repos_;
  std::vector<Request> requests_;
  uint64_t bytes_served_ = 0;
};

}  // namespace tessera::test
