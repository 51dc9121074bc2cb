// The --api-keys file (api_keys.h): its grammar (comments, blank lines, whitespace, CRLF), every
// kind of bad line refused with its line number and never the key, the file's mode checked as ssh
// does, TESSERA_API_KEY beside it, and the keyring naming the key a token matches. Then the
// API service: Screen notes the key's name on the request, and a reload keeps the old keys when
// the new file is bad.
#include "server/api_keys.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include "server/api_service.h"
#include "test_support.h"

namespace tessera::server {
namespace {

const std::string kKeyA = "key-a-0123456789abcdef";
const std::string kKeyB = "key-b-0123456789abcdef";

TEST(ApiKeys, ParsesNamesAndKeysSkippingCommentsAndBlankLines) {
  auto keys = ParseApiKeys("# team keys\n\nalice:" + kKeyA + "\r\n  \t bob:" + kKeyB +
                           "  \n   # indented comment\n\t\n");
  ASSERT_TRUE(keys) << keys.status().message();
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0].name, "alice");
  EXPECT_EQ((*keys)[0].key, kKeyA);
  EXPECT_EQ((*keys)[1].name, "bob");
  EXPECT_EQ((*keys)[1].key, kKeyB);
  // The key is everything after the first colon (a key may hold colons); no final newline.
  keys = ParseApiKeys("ci.runner-2_x:" + kKeyA + ":tail");
  ASSERT_TRUE(keys);
  EXPECT_EQ((*keys)[0].name, "ci.runner-2_x");
  EXPECT_EQ((*keys)[0].key, kKeyA + ":tail");
}

TEST(ApiKeys, EveryBadLineIsRefusedByNumberWithoutShowingTheKey) {
  const std::string secret = "s3cr3t-s3cr3t-s3cr3t";
  struct Case {
    std::string text;
    std::string says;
  };
  const Case cases[] = {
      {"alice " + secret, "line 1: expected name:key"},
      {"# c\n\n" + secret, "line 3: expected name:key"},
      {":" + secret, "line 1: the name"},
      {"al ice:" + secret, "line 1: the name"},
      {"al/ice:" + secret, "line 1: the name"},
      {"\xc3\xa9lise:" + secret, "line 1: the name"},
      {std::string(65, 'n') + ":" + secret, "line 1: the name"},
      {"alice:", "line 1: the key of 'alice' must be 16-512"},
      {"alice:short-key-15chr", "line 1: the key of 'alice' must be 16-512"},
      {"alice:" + std::string(513, 'k'), "line 1: the key of 'alice' must be 16-512"},
      {"alice:s3cr3t s3cr3t-s3cr3t", "line 1: the key of 'alice'"},
      {"alice:s3cr3t\x01s3cr3t-s3cr3t", "line 1: the key of 'alice'"},
      {"alice:s3cr3t-\xc3\xa9-s3cr3t-s3cr3t", "line 1: the key of 'alice'"},
      {"alice:" + kKeyA + "\nbob:" + kKeyB + "\nalice:" + secret,
       "line 3: the name 'alice' is also on line 1"},
      {"alice:" + secret + "\n# x\nbob:" + secret,
       "line 3: the key of 'bob' is the key of 'alice' (line 1)"},
      {"", "holds no keys"},
      {"# only a comment\n\n", "holds no keys"},
  };
  for (const Case& c : cases) {
    auto keys = ParseApiKeys(c.text);
    ASSERT_FALSE(keys) << c.text;
    EXPECT_NE(keys.status().message().find(c.says), std::string::npos)
        << keys.status().message() << " / wanted: " << c.says;
    EXPECT_EQ(keys.status().message().find("s3cr3t"), std::string::npos) << keys.status().message();
  }
}

TEST(ApiKeys, TheFileMustBeReadableByItsOwnerOnly) {
  test::TempDir tmp;
  const std::string path = tmp.File("keys");
  test::WriteFile(path, "alice:" + kKeyA + "\n");
  for (mode_t mode : {0644, 0640, 0604, 0620, 0602, 0660}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    auto keys = LoadApiKeysFile(path);
    ASSERT_FALSE(keys) << mode;
    EXPECT_EQ(keys.status().code(), ErrorCode::kPermissionDenied);
    EXPECT_NE(keys.status().message().find("chmod 600 " + path), std::string::npos)
        << keys.status().message();
  }
  for (mode_t mode : {0600, 0400}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    auto keys = LoadApiKeysFile(path);
    ASSERT_TRUE(keys) << keys.status().message();
    EXPECT_EQ(keys->size(), 1u);
  }
  auto missing = LoadApiKeysFile(tmp.File("nothing"));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("--api-keys " + tmp.File("nothing")),
            std::string::npos);
  ASSERT_EQ(::chmod(tmp.path().c_str(), 0700), 0);
  EXPECT_FALSE(LoadApiKeysFile(tmp.path()));  // a directory
  // A bad line names the file too.
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  test::WriteFile(path, "alice:" + kKeyA + "\nbroken\n");
  auto bad = LoadApiKeysFile(path);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find(path), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status().message();
}

TEST(ApiKeys, TheEnvironmentsKeyIsNamedDefault) {
  auto keys = WithDefaultKey({{"alice", kKeyA}}, kKeyB);
  ASSERT_TRUE(keys);
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[1].name, "default");
  EXPECT_EQ(WithDefaultKey({{"alice", kKeyA}}, "")->size(), 1u);
  auto taken = WithDefaultKey({{"default", kKeyA}}, kKeyB);
  ASSERT_FALSE(taken);
  EXPECT_NE(taken.status().message().find("TESSERA_API_KEY's"), std::string::npos);
  auto same = WithDefaultKey({{"alice", kKeyA}}, kKeyA);
  ASSERT_FALSE(same);
  EXPECT_EQ(same.status().message().find(kKeyA), std::string::npos);
}

TEST(ApiKeys, TheKeyringNamesTheMatchingKeyOnly) {
  ApiKeyring ring;
  EXPECT_FALSE(ring.Identify(kKeyA));  // no keys: nobody
  ring.Replace({{"alice", kKeyA}, {"bob", kKeyB}, {"carol", kKeyA + "-longer"}});
  EXPECT_EQ(ring.Identify(kKeyA), "alice");
  EXPECT_EQ(ring.Identify(kKeyB), "bob");
  EXPECT_EQ(ring.Identify(kKeyA + "-longer"), "carol");
  for (const std::string& wrong :
       {std::string(), kKeyA.substr(0, kKeyA.size() - 1), kKeyA + "-", kKeyA + "-longe",
        std::string("key-c-0123456789abcdef"), std::string(kKeyA.size(), '\0')}) {
    EXPECT_FALSE(ring.Identify(wrong)) << wrong;
  }
  ring.Replace({{"bob", kKeyB}});
  EXPECT_FALSE(ring.Identify(kKeyA));
  EXPECT_EQ(ring.Identify(kKeyB), "bob");
  EXPECT_EQ(ring.size(), 1u);
}

HttpRequest Head(const std::string& key) {
  HttpRequest r;
  r.method = "GET";
  r.path = r.target = "/v1/models";
  r.remote_addr = "127.0.0.1";
  if (!key.empty()) r.headers.push_back({"Authorization", "Bearer " + key});
  return r;
}

// The service: each key's name lands on the request it authenticated; a reload adds and drops
// keys, and a bad file (or one whose mode became too open) leaves the keys as they were.
TEST(ApiKeys, TheServiceNamesTheKeyAndReloadsOnlyAGoodFile) {
  test::TempDir tmp;
  const std::string path = tmp.File("keys");
  test::WriteFile(path, "alice:" + kKeyA + "\n");
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  ServeOptions options;
  options.models = {{"chat", "/nonexistent/chat", ModelKind::kChat}};
  options.api_key = "env-key-0123456789";
  options.api_keys_file = path;
  options.api_keys = *LoadApiKeysFile(path);
  ApiService service(options);
  auto who = [&](const std::string& key) -> std::string {
    HttpRequest head = Head(key);
    if (auto refused = service.Screen(head)) return std::to_string(refused->status);
    return head.api_key_name;
  };
  EXPECT_EQ(who(kKeyA), "alice");
  EXPECT_EQ(who("env-key-0123456789"), "default");
  EXPECT_EQ(who(kKeyB), "401");
  EXPECT_EQ(who(""), "401");

  test::WriteFile(path, "alice:" + kKeyA + "\nbob:" + kKeyB + "\n");
  std::string message;
  ASSERT_TRUE(service.ReloadApiKeys(&message).ok()) << message;
  EXPECT_EQ(who(kKeyB), "bob");

  test::WriteFile(path, "bob:" + kKeyB + "\nbob:" + kKeyA + "\n");  // a duplicate name
  EXPECT_FALSE(service.ReloadApiKeys(&message).ok());
  EXPECT_NE(message.find("line 2"), std::string::npos) << message;
  EXPECT_NE(message.find("3 keys loaded before stay in use"), std::string::npos) << message;
  EXPECT_EQ(who(kKeyA), "alice");
  EXPECT_EQ(who(kKeyB), "bob");

  test::WriteFile(path, "bob:" + kKeyB + "\n");
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  EXPECT_FALSE(service.ReloadApiKeys(&message).ok());
  EXPECT_NE(message.find("chmod 600"), std::string::npos) << message;
  EXPECT_EQ(who(kKeyA), "alice");

  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  ASSERT_TRUE(service.ReloadApiKeys(&message).ok()) << message;
  EXPECT_EQ(who(kKeyA), "401");  // dropped
  EXPECT_EQ(who(kKeyB), "bob");
  EXPECT_EQ(who("env-key-0123456789"), "default");  // TESSERA_API_KEY stays
}

}  // namespace
}  // namespace tessera::server
