// Resolution (tessera's store, the Hugging Face cache used in place, paths), lock files,
// rm and the atomic swap.
#include "catalog/model_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "base/sha256.h"
#include "catalog/builtin_model.h"
#include "catalog/package.h"
#include "model/synthetic_checkpoint.h"
#include "test_support.h"

namespace tessera {
namespace {
namespace fs = std::filesystem;

constexpr char kCommit[] = "0123456789abcdef0123456789abcdef01234567";

class ModelStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    models_ = tmp_.File("models");
    hf_home_ = tmp_.File("hf");
    setenv("TESSERA_MODELS", models_.c_str(), 1);
    setenv("HF_HOME", hf_home_.c_str(), 1);
    unsetenv("HF_HUB_CACHE");
    // Ollama's store and LM Studio's folder (under HOME) are looked in too: empty ones.
    setenv("OLLAMA_MODELS", tmp_.File("ollama").c_str(), 1);
    setenv("HOME", tmp_.File("home").c_str(), 1);
    auto catalog = BuiltinCatalog();
    ASSERT_TRUE(catalog);
    catalog_ = *catalog;
  }

  // The layout huggingface_hub writes: blobs named by hash, snapshot files as relative
  // symlinks into them, refs/main holding the commit.
  std::string MakeHubCacheModel(const std::string& repo_dir_name) {
    const std::string source = tmp_.File("source");
    SyntheticModelSpec spec;
    spec.vocab = 512;
    EXPECT_TRUE(WriteSyntheticModel(source, spec).ok());
    const std::string repo_dir = hf_home_ + "/hub/" + repo_dir_name;
    const std::string snapshot = repo_dir + "/snapshots/" + kCommit;
    fs::create_directories(repo_dir + "/blobs");
    fs::create_directories(snapshot);
    fs::create_directories(repo_dir + "/refs");
    test::WriteFile(repo_dir + "/refs/main", kCommit);
    for (const auto& entry : fs::directory_iterator(source)) {
      auto digest = Sha256File(entry.path().string());
      EXPECT_TRUE(digest);
      fs::rename(entry.path(), repo_dir + "/blobs/" + *digest);
      fs::create_symlink("../../blobs/" + *digest,
                         snapshot + "/" + entry.path().filename().string());
    }
    return snapshot;
  }

  test::TempDir tmp_;
  std::string models_;
  std::string hf_home_;
  const Catalog* catalog_ = nullptr;
};

TEST_F(ModelStoreTest, DefaultsFollowTheEnvironment) {
  EXPECT_EQ(*ModelsDir(), models_);
  EXPECT_EQ(*HubCacheDir(), hf_home_ + "/hub");
  setenv("HF_HUB_CACHE", "/somewhere/else", 1);
  EXPECT_EQ(*HubCacheDir(), "/somewhere/else");
  unsetenv("TESSERA_MODELS");
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(*ModelsDir(), "/home/u/.local/share/tessera/models");
}

TEST_F(ModelStoreTest, HubCacheSnapshotIsFoundAndUsedInPlace) {
  const std::string snapshot = MakeHubCacheModel("models--Qwen--Qwen3-0.6B");
  auto resolved = ResolveModel("qwen3-0.6b", *catalog_);
  ASSERT_TRUE(resolved) << resolved.status().message();
  EXPECT_EQ(resolved->dir, snapshot);  // in place: nothing copied
  EXPECT_EQ(resolved->location, ModelLocation::kHubCache);
  EXPECT_FALSE(fs::exists(models_));
  // By repository and by commit too; an unknown ref is not there.
  EXPECT_EQ(ResolveModel("Qwen/Qwen3-0.6B", *catalog_)->dir, snapshot);
  EXPECT_EQ(ResolveModel(std::string("qwen3-0.6b@") + kCommit, *catalog_)->dir, snapshot);
  auto missing = ResolveModel("qwen3-0.6b@v2", *catalog_);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("tessera pull"), std::string::npos);

  auto listed = ListInstalledModels(*catalog_, /*rehash=*/false);
  ASSERT_TRUE(listed) << listed.status().message();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, "qwen3-0.6b");
  EXPECT_EQ((*listed)[0].purpose, "chat");
  EXPECT_EQ((*listed)[0].location, ModelLocation::kHubCache);
  EXPECT_EQ((*listed)[0].commit, kCommit);
  EXPECT_GT((*listed)[0].size_bytes, 10000u);  // symlinks followed to the blobs

  // rm never deletes from the hub cache.
  auto removed = RemoveStoredModel("qwen3-0.6b", *catalog_);
  ASSERT_FALSE(removed);
  EXPECT_NE(removed.status().message().find("Hugging Face cache"), std::string::npos);
  EXPECT_TRUE(fs::exists(snapshot + "/config.json"));
}

// Every name `tessera list` prints is accepted by resolve (and so by generate, chat and rm,
// which parse names the same way) and leads back to the folder listed.
TEST_F(ModelStoreTest, EveryListedNameResolvesToItsFolder) {
  SyntheticModelSpec spec;
  spec.vocab = 512;
  // ORG/REPO pulls are stored as "Org--Name"; a catalog id under its id; a folder made by
  // hand whose name no command accepts; repositories now in the catalog pulled before it named
  // them, one of them also pulled since (under its id, which comes first).
  for (const char* folder :
       {"demo--q25-synth", "qwen3-0.6b", "my model", "Qwen--Qwen3-4B-x", "Qwen--Qwen3-Embedding-4B",
        "Qwen--Qwen3-Reranker-4B", "qwen3-reranker-4b"}) {
    fs::create_directories(models_ + "/" + folder);
    ASSERT_TRUE(WriteSyntheticModel(models_ + "/" + folder, spec).ok()) << folder;
  }
  // A hub cache snapshot main points to, and one shadowed by the stored qwen3-0.6b.
  const std::string cached = MakeHubCacheModel("models--Qwen--Qwen3-0.6B");
  // A first-use package of a read-only source.
  const std::string package = models_ + "/.packages/src-0123abcd-f32";
  fs::create_directories(models_ + "/.packages");
  ASSERT_TRUE(
      ConvertToPackage(models_ + "/qwen3-0.6b", package, {.weights = WeightFormat::kF32}).ok());

  auto listed = ListInstalledModels(*catalog_, /*rehash=*/false);
  ASSERT_TRUE(listed) << listed.status().message();
  std::map<std::string, std::string> name_of_dir;
  for (const InstalledModel& m : *listed) {
    SCOPED_TRACE(m.name);
    name_of_dir[m.dir] = m.name;
    EXPECT_TRUE(LooksLikePath(m.name) || m.name.find("--") == std::string::npos);
    auto resolved = ResolveModel(m.name, *catalog_);
    ASSERT_TRUE(resolved) << resolved.status().message();
    EXPECT_EQ(fs::path(resolved->dir).lexically_normal(), fs::path(m.dir).lexically_normal());
    EXPECT_GT(m.size_bytes, 0u);
  }
  EXPECT_EQ(name_of_dir[models_ + "/demo--q25-synth"], "demo/q25-synth");
  EXPECT_EQ(name_of_dir[models_ + "/Qwen--Qwen3-4B-x"], "Qwen/Qwen3-4B-x");
  EXPECT_EQ(name_of_dir[models_ + "/qwen3-0.6b"], "qwen3-0.6b");
  // A pull from before the catalog named the repository is still found by both names.
  EXPECT_EQ(name_of_dir[models_ + "/Qwen--Qwen3-Embedding-4B"], "Qwen/Qwen3-Embedding-4B");
  EXPECT_EQ(ResolveModel("qwen3-embedding-4b", *catalog_)->dir,
            models_ + "/Qwen--Qwen3-Embedding-4B");
  EXPECT_EQ(name_of_dir[models_ + "/qwen3-reranker-4b"], "qwen3-reranker-4b");
  // No name reaches these: listed by path, which every command taking a model accepts.
  EXPECT_EQ(name_of_dir[models_ + "/my model"], models_ + "/my model");
  EXPECT_EQ(name_of_dir[models_ + "/Qwen--Qwen3-Reranker-4B"],
            models_ + "/Qwen--Qwen3-Reranker-4B");
  // The stored copy comes first, so the cached snapshot needs its commit.
  EXPECT_EQ(name_of_dir[cached], std::string("qwen3-0.6b@") + kCommit);
  ASSERT_EQ(name_of_dir.count(package), 1u);
  EXPECT_EQ(name_of_dir[package], package);
  // rm accepts a listed store name, and finds the older copy's folder too.
  ASSERT_TRUE(RemoveStoredModel("demo/q25-synth", *catalog_));
  EXPECT_FALSE(fs::exists(models_ + "/demo--q25-synth"));
  ASSERT_TRUE(RemoveStoredModel("Qwen/Qwen3-Embedding-4B", *catalog_));
  EXPECT_FALSE(fs::exists(models_ + "/Qwen--Qwen3-Embedding-4B"));
}

TEST_F(ModelStoreTest, HostileRefsAreRefused) {
  MakeHubCacheModel("models--Qwen--Qwen3-0.6B");
  test::WriteFile(hf_home_ + "/hub/models--Qwen--Qwen3-0.6B/refs/main", "../../../../etc");
  auto resolved = ResolveModel("qwen3-0.6b", *catalog_);
  ASSERT_FALSE(resolved);
  EXPECT_NE(resolved.status().message().find("commit"), std::string::npos);
}

TEST_F(ModelStoreTest, StoreComesFirstAndPathsWorkDirectly) {
  MakeHubCacheModel("models--Qwen--Qwen3-0.6B");
  SyntheticModelSpec spec;
  spec.vocab = 512;
  fs::create_directories(models_ + "/qwen3-0.6b");
  ASSERT_TRUE(WriteSyntheticModel(models_ + "/qwen3-0.6b", spec).ok());
  auto resolved = ResolveModel("qwen3-0.6b", *catalog_);
  ASSERT_TRUE(resolved);
  EXPECT_EQ(resolved->location, ModelLocation::kStore);
  EXPECT_EQ(resolved->dir, models_ + "/qwen3-0.6b");

  auto path = ResolveModel(models_ + "/qwen3-0.6b", *catalog_);
  ASSERT_TRUE(path);
  EXPECT_EQ(path->location, ModelLocation::kPath);
  EXPECT_FALSE(ResolveModel(tmp_.File("nope"), *catalog_));
  EXPECT_FALSE(ResolveModel("../x", *catalog_));  // a path that does not exist
}

TEST_F(ModelStoreTest, LockFilesRoundTripAndCatchChanges) {
  const std::string dir = models_ + "/m";
  fs::create_directories(dir);
  test::WriteFile(dir + "/config.json", "{}");
  LockFile lock{"o/m", "main", kCommit, {{"config.json", 2, Sha256Hex("{}")}}};
  ASSERT_TRUE(WriteLockFile(dir, lock).ok());
  auto read = ReadLockFile(dir);
  ASSERT_TRUE(read) << read.status().message();
  EXPECT_EQ(read->commit, kCommit);
  ASSERT_EQ(read->files.size(), 1u);
  EXPECT_EQ(read->files[0].sha256, Sha256Hex("{}"));
  EXPECT_TRUE(CheckAgainstLock(dir, *read, true).ok());

  test::WriteFile(dir + "/config.json", "[]");  // same size, other bytes
  EXPECT_TRUE(CheckAgainstLock(dir, *read, false).ok());
  EXPECT_FALSE(CheckAgainstLock(dir, *read, true).ok());
  test::WriteFile(dir + "/config.json", "{ }");
  EXPECT_FALSE(CheckAgainstLock(dir, *read, false).ok());

  auto listed = ListInstalledModels(*catalog_, false);
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].verification.rfind("changed", 0), 0u) << (*listed)[0].verification;

  // A lock that points outside the model directory is refused.
  test::WriteFile(dir + "/tessera-lock.json",
                  R"({"format":1,"repo":"o/m","revision":"main","commit":"x",)"
                  R"("files":[{"path":"../../etc/passwd","size":1,"sha256":"00"}]})");
  EXPECT_FALSE(ReadLockFile(dir));
  test::WriteFile(dir + "/tessera-lock.json", "{\"format\":1");
  EXPECT_FALSE(ReadLockFile(dir));
  // A format of another type is an unknown format, not an exception.
  for (const char* format : {"\"1\"", "[1]", "1.5", "null"}) {
    test::WriteFile(dir + "/tessera-lock.json", std::string("{\"format\":") + format + "}");
    auto lock = ReadLockFile(dir);
    ASSERT_FALSE(lock) << format;
    EXPECT_NE(lock.status().message().find("unknown lock format"), std::string::npos)
        << lock.status().message();
  }
}

TEST_F(ModelStoreTest, RemoveDeletesOnlyFromTheStore) {
  SyntheticModelSpec spec;
  spec.vocab = 512;
  fs::create_directories(models_ + "/my-org--tiny");
  ASSERT_TRUE(WriteSyntheticModel(models_ + "/my-org--tiny", spec).ok());
  EXPECT_FALSE(RemoveStoredModel("../my-org--tiny", *catalog_));
  EXPECT_FALSE(RemoveStoredModel("/", *catalog_));
  EXPECT_FALSE(RemoveStoredModel("my-org/other", *catalog_));
  auto removed = RemoveStoredModel("my-org/tiny", *catalog_);
  ASSERT_TRUE(removed) << removed.status().message();
  EXPECT_FALSE(fs::exists(models_ + "/my-org--tiny"));
  EXPECT_TRUE(fs::is_empty(models_));
}

// A model the catalog does not know is listed with what its checkpoint is: one without a chat
// template as a completion model (serve offers it on /v1/completions only).
TEST_F(ModelStoreTest, AModelOutsideTheCatalogIsListedByItsKind) {
  SyntheticModelSpec spec;
  spec.vocab = 512;
  for (const char* name : {"my-chat", "my-stories"}) {
    fs::create_directories(models_ + "/" + name);
    ASSERT_TRUE(WriteSyntheticModel(models_ + "/" + name, spec).ok());
  }
  test::WriteFile(models_ + "/my-stories/tokenizer_config.json", R"({"bos_token": "<s>"})");
  auto listed = ListInstalledModels(*catalog_, /*rehash=*/false);
  ASSERT_TRUE(listed) << listed.status().message();
  std::map<std::string, std::string> purpose;
  // By folder: these are no catalog ids, so they are listed by path (EveryListedName...).
  for (const InstalledModel& m : *listed) purpose[fs::path(m.dir).filename().string()] = m.purpose;
  EXPECT_EQ(purpose["my-chat"], "chat");
  EXPECT_EQ(purpose["my-stories"], "completion");
}

// What declares a loaded model's tool-call syntax: the catalog entry its folder was pulled as.
TEST_F(ModelStoreTest, AFolderFindsItsCatalogEntryByWhereItCameFrom) {
  const CatalogEntry* qwen3 = catalog_->Find("qwen3-0.6b");
  ASSERT_NE(qwen3, nullptr);
  // In the hub cache: by the cache's folder name, with or without a trailing slash.
  const std::string snapshot = MakeHubCacheModel("models--Qwen--Qwen3-0.6B");
  EXPECT_EQ(CatalogEntryOfModelDir(*catalog_, snapshot), qwen3);
  EXPECT_EQ(CatalogEntryOfModelDir(*catalog_, snapshot + "/"), qwen3);
  // Pulled into the store (or copied anywhere with its lock): by the lock's repository.
  const std::string pulled = tmp_.File("anywhere/pulled");
  fs::create_directories(pulled);
  ASSERT_TRUE(WriteLockFile(pulled, LockFile{qwen3->repo, "main", kCommit, {}}).ok());
  EXPECT_EQ(CatalogEntryOfModelDir(*catalog_, pulled), qwen3);
  // A package: by the source its manifest records.
  const std::string package = tmp_.File("anywhere/package");
  fs::create_directories(package);
  test::WriteFile(package + "/" + kPackageManifestName,
                  R"({"source": {"repo": ")" + qwen3->repo + R"("}})");
  EXPECT_EQ(CatalogEntryOfModelDir(*catalog_, package), qwen3);
  // Anything else, or a repository the catalog does not know, has no entry.
  ASSERT_TRUE(WriteLockFile(pulled, LockFile{"my-org/tiny", "main", kCommit, {}}).ok());
  EXPECT_EQ(CatalogEntryOfModelDir(*catalog_, pulled), nullptr);
  EXPECT_EQ(CatalogEntryOfModelDir(*catalog_, tmp_.File("anywhere")), nullptr);
  const std::string fake = tmp_.File("models--Qwen--Qwen3-0.6B/other/x");
  fs::create_directories(fake);
  EXPECT_EQ(CatalogEntryOfModelDir(*catalog_, fake), nullptr);
}

TEST_F(ModelStoreTest, SwapReplacesADirectoryInOneStep) {
  fs::create_directories(tmp_.File("old"));
  test::WriteFile(tmp_.File("old/a"), "old");
  fs::create_directories(tmp_.File("new"));
  test::WriteFile(tmp_.File("new/a"), "new");
  ASSERT_TRUE(SwapDirectoryIntoPlace(tmp_.File("new"), tmp_.File("old")).ok());
  EXPECT_EQ(test::ReadFile(tmp_.File("old/a")), "new");
  EXPECT_FALSE(fs::exists(tmp_.File("new")));
  fs::create_directories(tmp_.File("fresh"));
  ASSERT_TRUE(SwapDirectoryIntoPlace(tmp_.File("fresh"), tmp_.File("placed")).ok());
  EXPECT_TRUE(fs::is_directory(tmp_.File("placed")));
}

// The built-in demo model: written out on first use with the files' published hashes
// (models/stories260k/SOURCE.md), hidden from the listing, and written again when a file
// there was changed.
TEST_F(ModelStoreTest, TheBuiltInModelIsWrittenOutAndRepaired) {
  auto sha256 = [](const std::string& path) {
    auto digest = Sha256File(path);
    return digest ? *digest : digest.status().ToString();
  };
  auto resolved = ResolveModel(kBuiltinModelName, *catalog_);
  ASSERT_TRUE(resolved) << resolved.status().ToString();
  EXPECT_EQ(resolved->location, ModelLocation::kBuiltin);
  EXPECT_EQ(resolved->dir, models_ + "/.builtin/stories260k");
  const std::string weights = resolved->dir + "/model.safetensors";
  const std::string published = "c549afd8464a1250200b5338d39d23d0bf096c7f6578944268d40512c133daa6";
  EXPECT_EQ(sha256(weights), published);
  EXPECT_EQ(sha256(resolved->dir + "/tokenizer.json"),
            "5c4194b6711f41ca349c1604d2af1208b89d74e352cd0c732b21dedd5aa43d29");
  auto listed = ListInstalledModels(*catalog_, false);
  ASSERT_TRUE(listed);
  EXPECT_TRUE(listed->empty());
  {
    std::fstream f(weights, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5000);
    f.put('\x7f');
  }
  ASSERT_NE(sha256(weights), published);
  auto again = MaterializeBuiltinModel();
  ASSERT_TRUE(again) << again.status().ToString();
  EXPECT_EQ(sha256(weights), published);
}

}  // namespace
}  // namespace tessera
