// The Responses API's store (server/response_store.h): its count, byte and time limits, oldest
// evicted first, expiry on a test clock (no sleeps), and scoping by API key name.
#include "server/response_store.h"

#include <gtest/gtest.h>

namespace tessera::server {
namespace {

using std::chrono::seconds;

// A clock the test moves by hand.
struct TestClock {
  ResponseStore::Clock::time_point now{};
  std::function<ResponseStore::Clock::time_point()> fn() {
    return [this] { return now; };
  }
};

StoredResponse Response(const std::string& id, size_t text_bytes = 0) {
  StoredResponse r;
  r.response = {{"id", id}, {"object", "response"}};
  r.conversation.push_back({"user", std::string(text_bytes, 'x'), "", "", ""});
  return r;
}

TEST(ResponseStore, KeepsAndForgetsPerTenant) {
  ResponseStore store;
  ASSERT_TRUE(store.Put("a", "resp_1", Response("resp_1")));
  auto kept = store.Get("a", "resp_1");
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->response["id"], "resp_1");
  EXPECT_EQ(kept->conversation.size(), 1u);
  // Another key sees nothing, and cannot delete it.
  EXPECT_EQ(store.Get("b", "resp_1"), nullptr);
  EXPECT_FALSE(store.Erase("b", "resp_1"));
  EXPECT_NE(store.Get("a", "resp_1"), nullptr);
  // Its own key deletes it once.
  EXPECT_TRUE(store.Erase("a", "resp_1"));
  EXPECT_FALSE(store.Erase("a", "resp_1"));
  EXPECT_EQ(store.Get("a", "resp_1"), nullptr);
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.bytes(), 0u);
}

TEST(ResponseStore, TheOldestGoFirstPastTheCount) {
  ResponseStore store({.max_responses = 3, .max_bytes = 1 << 20, .lifetime = seconds(3600)});
  for (int i = 1; i <= 5; ++i) {
    const std::string id = "resp_" + std::to_string(i);
    ASSERT_TRUE(store.Put(i % 2 ? "a" : "b", id, Response(id)));
  }
  EXPECT_EQ(store.size(), 3u);
  EXPECT_EQ(store.Get("a", "resp_1"), nullptr);
  EXPECT_EQ(store.Get("b", "resp_2"), nullptr);
  EXPECT_NE(store.Get("a", "resp_3"), nullptr);
  EXPECT_NE(store.Get("b", "resp_4"), nullptr);
  EXPECT_NE(store.Get("a", "resp_5"), nullptr);
}

TEST(ResponseStore, TheOldestGoFirstPastTheBytes) {
  const size_t one = StoredResponseBytes(Response("resp_1", 1000));
  ResponseStore store({.max_responses = 100, .max_bytes = 3 * one, .lifetime = seconds(3600)});
  for (int i = 1; i <= 3; ++i) {
    const std::string id = "resp_" + std::to_string(i);
    ASSERT_TRUE(store.Put("a", id, Response(id, 1000)));
  }
  EXPECT_EQ(store.bytes(), 3 * one);
  // A fourth of the same size pushes out the first only.
  ASSERT_TRUE(store.Put("a", "resp_4", Response("resp_4", 1000)));
  EXPECT_EQ(store.Get("a", "resp_1"), nullptr);
  EXPECT_NE(store.Get("a", "resp_2"), nullptr);
  EXPECT_EQ(store.size(), 3u);
  EXPECT_LE(store.bytes(), 3 * one);
  // One twice as large pushes out two.
  ASSERT_TRUE(store.Put("a", "resp_5", Response("resp_5", 2000)));
  EXPECT_EQ(store.Get("a", "resp_2"), nullptr);
  EXPECT_EQ(store.Get("a", "resp_3"), nullptr);
  EXPECT_NE(store.Get("a", "resp_4"), nullptr);
  EXPECT_NE(store.Get("a", "resp_5"), nullptr);
  EXPECT_LE(store.bytes(), 3 * one);
  // One larger than the whole store is not kept, and evicts nothing.
  EXPECT_FALSE(store.Put("a", "resp_6", Response("resp_6", 4 * one)));
  EXPECT_EQ(store.Get("a", "resp_6"), nullptr);
  EXPECT_EQ(store.size(), 2u);
}

TEST(ResponseStore, ResponsesExpireAfterTheirLifetime) {
  TestClock clock;
  ResponseStore store({.max_responses = 10, .max_bytes = 1 << 20, .lifetime = seconds(60)},
                      clock.fn());
  ASSERT_TRUE(store.Put("a", "resp_1", Response("resp_1")));
  clock.now += seconds(30);
  ASSERT_TRUE(store.Put("a", "resp_2", Response("resp_2")));
  clock.now += seconds(29);
  EXPECT_NE(store.Get("a", "resp_1"), nullptr);  // 59 s old
  clock.now += seconds(1);
  EXPECT_EQ(store.Get("a", "resp_1"), nullptr);  // 60 s old: gone
  EXPECT_NE(store.Get("a", "resp_2"), nullptr);
  EXPECT_EQ(store.size(), 1u);
  clock.now += seconds(30);
  EXPECT_FALSE(store.Erase("a", "resp_2"));  // expired before it was deleted
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.bytes(), 0u);
}

TEST(ResponseStore, KeepingAnIdAgainReplacesIt) {
  ResponseStore store;
  ASSERT_TRUE(store.Put("a", "resp_1", Response("resp_1", 10)));
  ASSERT_TRUE(store.Put("a", "resp_1", Response("resp_1", 20)));
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.bytes(), StoredResponseBytes(Response("resp_1", 20)));
  EXPECT_EQ(store.Get("a", "resp_1")->conversation[0].content.size(), 20u);
}

TEST(ResponseStore, TheDefaultLimitsAreTheDocumentedOnes) {
  ResponseStore store;
  EXPECT_EQ(store.limits().max_responses, 1000u);
  EXPECT_EQ(store.limits().max_bytes, size_t{64} << 20);
  EXPECT_EQ(store.limits().lifetime, seconds(3600));
}

}  // namespace
}  // namespace tessera::server
