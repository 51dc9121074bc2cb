#include "fake_hub.h"

#include <httplib.h>
#include <openssl/evp.h>

#include <chrono>

#include <nlohmann/json.hpp>

#include "base/sha256.h"

namespace tessera::test {
namespace {

// Git's id for a blob, as the hub reports it: SHA-1 of "blob <size>\0" + bytes.
std::string GitBlobId(const std::string& bytes) {
  std::string object = "blob " + std::to_string(bytes.size());
  object.push_back('\0');
  object += bytes;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(object.data(), object.size(), digest, &size, EVP_sha1(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) {
    hex.push_back("0123456789abcdef"[digest[i] >> 4]);
    hex.push_back("0123456789abcdef"[digest[i] & 15]);
  }
  return hex;
}

// The hub gives stalls this long at most, so a broken client cannot hang the tests forever.
constexpr auto kMaxStall = std::chrono::seconds(30);

}  // namespace

FakeHub::FakeHub() : server_(std::make_unique<httplib::Server>()) {
  server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mutex_);
    requests_.push_back({req.path, req.get_header_value("Range")});
    if (!token_.empty() && req.get_header_value("Authorization") != "Bearer " + token_) {
      res.status = 401;
      res.set_content("{\"error\":\"Invalid credentials\"}", "application/json");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  // GET /api/models/{org}/{name}/revision/{rev}
  server_->Get(R"(/api/models/([^/]+)/([^/]+)/revision/(.+))", [this](const httplib::Request& req,
                                                                      httplib::Response& res) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (stall_file_list_) {
      stall_released_.wait_for(lock, kMaxStall, [this] { return stopping_; });
      res.status = 503;
      return;
    }
    auto it = repos_.find(std::string(req.matches[1]) + "/" + std::string(req.matches[2]));
    if (it == repos_.end()) {
      res.status = 404;
      res.set_content("{\"error\":\"Repository not found\"}", "application/json");
      return;
    }
    nlohmann::json doc = {
        {"id", it->first}, {"sha", it->second.commit}, {"siblings", nlohmann::json::array()}};
    // Files a model does not need are listed too; the client must skip them.
    doc["siblings"].push_back({{"rfilename", "README.md"}, {"size", 10}});
    doc["siblings"].push_back({{"rfilename", "../escape.json"}, {"size", 1}});
    for (const auto& [name, file] : it->second.files) {
      nlohmann::json sibling = {{"rfilename", name},
                                {"size", file.published.size()},
                                {"blobId", GitBlobId(file.published)}};
      if (name.ends_with(".safetensors")) {
        sibling["lfs"] = {{"sha256", Sha256Hex(file.published)},
                          {"size", file.published.size()},
                          {"pointerSize", 134}};
      }
      doc["siblings"].push_back(sibling);
    }
    res.set_content(doc.dump(), "application/json");
  });

  // GET /{org}/{name}/resolve/{rev}/{file}; httplib applies Range requests to the provider.
  server_->Get(R"(/([^/]+)/([^/]+)/resolve/([^/]+)/(.+))", [this](const httplib::Request& req,
                                                                  httplib::Response& res) {
    std::unique_lock<std::mutex> lock(mutex_);
    const std::string repo = std::string(req.matches[1]) + "/" + std::string(req.matches[2]);
    auto it = repos_.find(repo);
    File* file = FindFile(repo, req.matches[4]);
    if (it == repos_.end() || file == nullptr || file->missing ||
        it->second.commit != std::string(req.matches[3])) {
      res.status = 404;
      res.set_content("Entry not found", "text/plain");
      return;
    }
    const std::string served = file->served;
    const size_t drop_after = file->drop_after;
    file->drop_after = 0;  // once
    const bool stall = file->stall;
    const size_t stall_after = file->stall_after;
    if (served.empty()) {
      // Observed: with a zero-length content provider this httplib never ends the response
      // (the client waited for its stall timeout), so an empty body is sent directly.
      res.set_content("", "application/octet-stream");
      return;
    }
    res.set_content_provider(served.size(), "application/octet-stream",
                             [this, served, drop_after, stall, stall_after](
                                 size_t offset, size_t length, httplib::DataSink& sink) {
                               size_t stop = offset + length;
                               const bool drop = drop_after > 0 && drop_after < stop;
                               if (drop) stop = std::max(offset, drop_after);
                               const bool stalled = stall && stall_after < stop;
                               if (stalled) stop = std::max(offset, stall_after);
                               constexpr size_t kChunk = 16384;
                               for (size_t at = offset; at < stop; at += kChunk) {
                                 size_t n = std::min(kChunk, stop - at);
                                 // Counted before the write: once the client has the bytes it
                                 // may exit and the test read the count at once.
                                 AddBytesServed(n);
                                 if (!sink.write(served.data() + at, n)) {
                                   SubtractBytesServed(n);
                                   return false;
                                 }
                               }
                               if (stalled) {
                                 std::unique_lock<std::mutex> lock(mutex_);
                                 stall_released_.wait_for(lock, kMaxStall,
                                                          [this] { return stopping_; });
                               }
                               return !drop && !stalled;  // false drops the connection mid-body
                             });
  });

  port_ = server_->bind_to_any_port("127.0.0.1");
  // The socket is listening once bound; requests queue until the loop accepts them.
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

FakeHub::~FakeHub() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stall_released_.notify_all();
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

void FakeHub::AddModel(const std::string& repo, const std::string& commit,
                       const std::map<std::string, std::string>& files) {
  std::lock_guard<std::mutex> lock(mutex_);
  Repo r;
  r.commit = commit;
  for (const auto& [name, bytes] : files) r.files[name] = File{bytes, bytes};
  repos_[repo] = std::move(r);
}

FakeHub::File* FakeHub::FindFile(const std::string& repo, const std::string& file) {
  auto it = repos_.find(repo);
  if (it == repos_.end()) return nullptr;
  auto f = it->second.files.find(file);
  return f == it->second.files.end() ? nullptr : &f->second;
}

void FakeHub::ServeInstead(const std::string& repo, const std::string& file, std::string bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (File* f = FindFile(repo, file)) f->served = std::move(bytes);
}

void FakeHub::DropConnectionOnce(const std::string& repo, const std::string& file, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (File* f = FindFile(repo, file)) f->drop_after = bytes;
}

void FakeHub::StallAfter(const std::string& repo, const std::string& file, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (File* f = FindFile(repo, file)) {
    f->stall = true;
    f->stall_after = bytes;
  }
}

void FakeHub::RequireToken(const std::string& token) {
  std::lock_guard<std::mutex> lock(mutex_);
  token_ = token;
}

void FakeHub::MissingFile(const std::string& repo, const std::string& file) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (File* f = FindFile(repo, file)) f->missing = true;
}

std::vector<FakeHub::Request> FakeHub::requests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_;
}

void FakeHub::AddBytesServed(uint64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  bytes_served_ += n;
}

void FakeHub::SubtractBytesServed(uint64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  bytes_served_ -= n;
}

uint64_t FakeHub::bytes_served() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_served_;
}

}  // namespace tessera::test
