#include "server/response_store.h"

namespace tessera::server {

namespace {
// A rough allowance for the containers around each message and response.
constexpr size_t kMessageOverheadBytes = 64;
constexpr size_t kResponseOverheadBytes = 256;
}  // namespace

size_t StoredResponseBytes(const StoredResponse& r) {
  size_t n = kResponseOverheadBytes + r.response.dump().size();
  for (const worker::ChatMessage& m : r.conversation) {
    n += kMessageOverheadBytes + m.role.size() + m.content.size() + m.tool_calls.size() +
         m.tool_call_id.size() + m.name.size();
  }
  return n;
}

ResponseStore::ResponseStore(ResponseStoreLimits limits, std::function<Clock::time_point()> now)
    : limits_(limits), now_(std::move(now)) {}

void ResponseStore::Remove(Order::iterator it) {
  bytes_ -= it->bytes;
  index_.erase(it->key);
  order_.erase(it);
}

void ResponseStore::DropExpired(Clock::time_point now) {
  // Kept in time order, so the expired ones are at the front.
  while (!order_.empty() && order_.front().expires <= now) Remove(order_.begin());
}

bool ResponseStore::Put(const std::string& tenant, const std::string& id, StoredResponse response) {
  const size_t bytes = StoredResponseBytes(response);
  if (bytes > limits_.max_bytes || limits_.max_responses == 0) return false;
  const Clock::time_point now = now_();
  std::lock_guard lock(mu_);
  DropExpired(now);
  auto key = std::make_pair(tenant, id);
  if (auto it = index_.find(key); it != index_.end()) Remove(it->second);
  while (!order_.empty() &&
         (order_.size() + 1 > limits_.max_responses || bytes_ + bytes > limits_.max_bytes)) {
    Remove(order_.begin());
  }
  order_.push_back({key, std::make_shared<const StoredResponse>(std::move(response)), bytes,
                    now + limits_.lifetime});
  index_[std::move(key)] = std::prev(order_.end());
  bytes_ += bytes;
  return true;
}

std::shared_ptr<const StoredResponse> ResponseStore::Get(const std::string& tenant,
                                                         const std::string& id) {
  const Clock::time_point now = now_();
  std::lock_guard lock(mu_);
  DropExpired(now);
  auto it = index_.find(std::make_pair(tenant, id));
  return it == index_.end() ? nullptr : it->second->response;
}

bool ResponseStore::Erase(const std::string& tenant, const std::string& id) {
  const Clock::time_point now = now_();
  std::lock_guard lock(mu_);
  DropExpired(now);
  auto it = index_.find(std::make_pair(tenant, id));
  if (it == index_.end()) return false;
  Remove(it->second);
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mu_);
  return order_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace tessera::server
