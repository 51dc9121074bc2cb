// The Responses API's store (POST /v1/responses with store: true): each kept response's
// object, as GET /v1/responses/{id} answers it, and its conversation (the input messages
// before it and its own output), which previous_response_id continues. It is bounded in
// count, in bytes and in time: past a limit the oldest responses go first, and a response is
// forgotten `lifetime` after it was kept. Responses are scoped by the API key's name: a key
// never reads, continues or deletes another key's responses.
//
//   ResponseStore store({.max_responses = 1000, .max_bytes = 64 << 20,
//                        .lifetime = std::chrono::hours(1)});
//   store.Put("team-a", "resp_1", {response_json, conversation});
//   if (auto kept = store.Get("team-a", "resp_1")) ... kept->conversation ...
//   store.Erase("team-a", "resp_1");
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/protocol.h"

namespace tessera::server {

struct ResponseStoreLimits {
  size_t max_responses = 1000;
  size_t max_bytes = size_t{64} << 20;  // 64 MiB, as StoredResponseBytes counts them
  std::chrono::seconds lifetime{3600};
};

struct StoredResponse {
  nlohmann::json response;  // the response object
  // Every message of the conversation up to and including this response's output (the
  // request's instructions excepted: OpenAI does not carry them over either).
  std::vector<worker::ChatMessage> conversation;
};

// What a stored response counts against max_bytes: its object's JSON text and its
// conversation's text, plus a fixed overhead per message and per response.
size_t StoredResponseBytes(const StoredResponse& r);

class ResponseStore {
 public:
  using Clock = std::chrono::steady_clock;

  // `now` is the store's clock (a test's own, to expire entries without waiting).
  explicit ResponseStore(ResponseStoreLimits limits = {},
                         std::function<Clock::time_point()> now = Clock::now);

  const ResponseStoreLimits& limits() const { return limits_; }
  // Keeps `response` as `id` of `tenant`, evicting the oldest responses as the limits need.
  // False (nothing kept, nothing evicted) when it alone is larger than max_bytes.
  bool Put(const std::string& tenant, const std::string& id, StoredResponse response);
  // The tenant's response `id`, or null when there is none (never kept, deleted, evicted,
  // expired, or another tenant's).
  std::shared_ptr<const StoredResponse> Get(const std::string& tenant, const std::string& id);
  // Forgets the tenant's response `id`; false when there was none.
  bool Erase(const std::string& tenant, const std::string& id);

  size_t size() const;
  size_t bytes() const;

 private:
  struct Entry {
    std::pair<std::string, std::string> key;  // tenant, id
    std::shared_ptr<const StoredResponse> response;
    size_t bytes = 0;
    Clock::time_point expires;
  };
  using Order = std::list<Entry>;  // oldest first

  void DropExpired(Clock::time_point now);  // with mu_ held
  void Remove(Order::iterator it);          // with mu_ held

  const ResponseStoreLimits limits_;
  const std::function<Clock::time_point()> now_;
  mutable std::mutex mu_;
  Order order_;
  std::map<std::pair<std::string, std::string>, Order::iterator> index_;
  size_t bytes_ = 0;
};

}  // namespace tessera::server
