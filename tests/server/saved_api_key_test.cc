// The generated API key kept across restarts (saved_api_key.h): where it lives, created 0600 in
// 0700 directories, the same key read back on the next start, a file others can read or one
// holding no key refused with what to do, and the service accepting nothing until the key is
// set.
#include "server/saved_api_key.h"

#include <dirent.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "server/api_service.h"
#include "test_support.h"

namespace tessera::server {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

size_t EntriesIn(const std::string& dir) {
  size_t n = 0;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") ++n;
  }
  ::closedir(d);
  return n;
}

TEST(SavedApiKey, LivesInTheConfigDirectory) {
  EXPECT_EQ(*SavedApiKeyPath("/x/config", "/home/u"), "/x/config/tessera/api-key");
  EXPECT_EQ(*SavedApiKeyPath(std::nullopt, "/home/u"), "/home/u/.config/tessera/api-key");
  // A relative XDG_CONFIG_HOME is not a place (the XDG specification says to ignore it).
  EXPECT_EQ(*SavedApiKeyPath("relative", "/home/u"), "/home/u/.config/tessera/api-key");
  // Set but empty (XDG_CONFIG_HOME= in a unit file) is no place either, and HOME= is none.
  EXPECT_EQ(*SavedApiKeyPath("", "/home/u"), "/home/u/.config/tessera/api-key");
  EXPECT_FALSE(SavedApiKeyPath("", ""));
  auto nowhere = SavedApiKeyPath(std::nullopt, std::nullopt);
  ASSERT_FALSE(nowhere);
  EXPECT_NE(nowhere.status().message().find("TESSERA_API_KEY"), std::string::npos);
}

TEST(SavedApiKey, IsCreatedPrivateOnceAndReadBackAfterwards) {
  test::TempDir tmp;
  const std::string config = tmp.File("config");  // missing: created 0700 with tessera/
  const std::string path = *SavedApiKeyPath(config, std::nullopt);
  auto first = LoadOrCreateSavedApiKey(path);
  ASSERT_TRUE(first) << first.status().message();
  EXPECT_TRUE(first->created);
  EXPECT_TRUE(first->key.starts_with("tsk-")) << first->key;
  EXPECT_EQ(first->key.size(), 4u + 32u);
  EXPECT_TRUE(ValidApiKey(first->key));
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ModeOf(config + "/tessera"), 0700u);
  EXPECT_EQ(ModeOf(config), 0700u);
  EXPECT_EQ(test::ReadFile(path), first->key + "\n");
  EXPECT_EQ(EntriesIn(config + "/tessera"), 1u);  // no temporary file left behind

  auto again = LoadOrCreateSavedApiKey(path);
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->key, first->key);

  // Another directory: another key.
  auto other = LoadOrCreateSavedApiKey(tmp.File("other/tessera/api-key"));
  ASSERT_TRUE(other);
  EXPECT_NE(other->key, first->key);
}

TEST(SavedApiKey, AKeyWrittenByHandIsUsedWithBlanksAroundIt) {
  test::TempDir tmp;
  const std::string path = tmp.File("api-key");
  test::WriteFile(path, "  my-own-key-0123456789\r\n\n");
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  auto saved = LoadOrCreateSavedApiKey(path);
  ASSERT_TRUE(saved) << saved.status().message();
  EXPECT_FALSE(saved->created);
  EXPECT_EQ(saved->key, "my-own-key-0123456789");
}

TEST(SavedApiKey, AFileOthersCanReadIsRefusedWithTheChmodToRun) {
  test::TempDir tmp;
  const std::string path = tmp.File("api-key");
  ASSERT_TRUE(LoadOrCreateSavedApiKey(path));
  const std::string key = test::ReadFile(path);
  for (mode_t mode : {0644, 0640, 0604, 0660}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    auto saved = LoadOrCreateSavedApiKey(path);
    ASSERT_FALSE(saved) << mode;
    EXPECT_EQ(saved.status().code(), ErrorCode::kPermissionDenied);
    EXPECT_NE(saved.status().message().find("chmod 600 " + path), std::string::npos)
        << saved.status().message();
    EXPECT_EQ(saved.status().message().find(key.substr(0, 20)), std::string::npos);
    EXPECT_EQ(test::ReadFile(path), key);  // left as it was, not replaced
  }
}

TEST(SavedApiKey, AFileHoldingNoKeyIsRefusedWithWhatToDo) {
  test::TempDir tmp;
  const std::string path = tmp.File("api-key");
  for (const std::string& text :
       {std::string(""), std::string("\n"), std::string("short\n"),
        std::string("two words-0123456789\n"), std::string("line-one-0123456789\nline-two\n"),
        std::string(600, 'k')}) {
    test::WriteFile(path, text);
    ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
    auto saved = LoadOrCreateSavedApiKey(path);
    ASSERT_FALSE(saved) << text;
    EXPECT_NE(saved.status().message().find("holds no API key"), std::string::npos)
        << saved.status().message();
    EXPECT_NE(saved.status().message().find("delete the file"), std::string::npos);
    EXPECT_EQ(saved.status().message().find("0123456789"), std::string::npos);
    EXPECT_EQ(test::ReadFile(path), text);  // never overwritten
  }
  // A directory where the file should be.
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
  auto dir = LoadOrCreateSavedApiKey(path);
  ASSERT_FALSE(dir);
  EXPECT_NE(dir.status().message().find("not a regular file"), std::string::npos);
}

TEST(SavedApiKey, AFileInTheWayOfTheDirectoryIsAnErrorNamingIt) {
  test::TempDir tmp;
  const std::string blocker = tmp.File("config");  // a file where the directory should be
  test::WriteFile(blocker, "");
  auto saved = LoadOrCreateSavedApiKey(blocker + "/tessera/api-key");
  ASSERT_FALSE(saved);
  EXPECT_NE(saved.status().message().find(blocker + "/tessera/api-key: cannot open it: Not a "
                                                    "directory"),
            std::string::npos)
      << saved.status().message();
}

TEST(SavedApiKey, AKeyThatCannotBeSavedSaysHowToGiveOne) {
  // /proc takes no new directories, not even from root.
  auto saved = LoadOrCreateSavedApiKey("/proc/tessera-test-config/tessera/api-key");
  ASSERT_FALSE(saved);
  const std::string m = saved.status().message();
  EXPECT_NE(m.find("cannot save a new API key: cannot create the directory "
                   "/proc/tessera-test-config"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("TESSERA_API_KEY or --api-keys FILE"), std::string::npos) << m;
  EXPECT_NE(m.find("XDG_CONFIG_HOME"), std::string::npos) << m;
}

TEST(SavedApiKey, TheServiceAcceptsNoTokenUntilTheKeyIsSet) {
  ServeOptions options;
  options.models = {{"chat", "/nonexistent/chat", ModelKind::kChat}};
  options.saved_api_key_file = "/nonexistent/api-key";
  ApiService service(options);
  auto status = [&](const std::string& token) {
    HttpRequest head;
    head.method = "GET";
    head.path = head.target = "/v1/models";
    head.remote_addr = "127.0.0.1";
    head.headers.push_back({"Authorization", "Bearer " + token});
    std::optional<HttpResponse> refused = service.Screen(head);
    return refused ? refused->status : 200;
  };
  EXPECT_EQ(status(""), 401);
  EXPECT_EQ(status("tsk-0123456789abcdef"), 401);
  service.UseSavedApiKey("tsk-0123456789abcdef");
  EXPECT_EQ(status("tsk-0123456789abcdef"), 200);
  EXPECT_EQ(status("tsk-0123456789abcdeX"), 401);
}

}  // namespace
}  // namespace tessera::server
