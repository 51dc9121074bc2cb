// End to end: the real tessera binary pulls a synthetic model from a hub-like local server
// (fake_hub.h) - full download, resume, corruption, wrong sizes, 404, 401, stalls - and
// list / resolve / rm see the result.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "fake_hub.h"
#include "model/synthetic_checkpoint.h"
#include "test_support.h"

namespace tessera {
namespace {
namespace fs = std::filesystem;

constexpr char kRepo[] = "test-org/tiny";
constexpr char kStoreName[] = "test-org--tiny";
constexpr char kCommitA[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
constexpr char kCommitB[] = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
constexpr char kShard1[] = "model-00001-of-00002.safetensors";

class PullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticModelSpec spec;
    spec.vocab = 512;
    spec.shards = 2;
    const std::string source = tmp_.File("source");
    fs::create_directories(source);
    ASSERT_TRUE(WriteSyntheticModel(source, spec).ok());
    for (const auto& entry : fs::directory_iterator(source)) {
      files_[entry.path().filename().string()] = test::ReadFile(entry.path().string());
    }
    ASSERT_TRUE(files_.count(kShard1));
    ASSERT_GT(files_[kShard1].size(), 100000u);
    files_["special_tokens_map.json"] = "";  // an empty file is still a file
    // A file a model does not need: it must not be downloaded.
    auto published = files_;
    published["pytorch_model.bin"] = std::string(5000, 'x');
    hub_.AddModel(kRepo, kCommitA, published);
    models_ = tmp_.File("models");
    model_dir_ = models_ + "/" + kStoreName;
  }

  test::ProcessResult Tessera(const std::vector<std::string>& args, const std::string& token = "") {
    std::vector<std::string> argv = {"env",
                                     "-u",
                                     "HF_TOKEN",
                                     "-u",
                                     "HF_HUB_CACHE",
                                     "HF_ENDPOINT=" + hub_.endpoint(),
                                     "TESSERA_MODELS=" + models_,
                                     "HF_HOME=" + tmp_.File("hf")};
    if (!token.empty()) argv.push_back("HF_TOKEN=" + token);
    argv.push_back(test::TesseraBinary());
    argv.insert(argv.end(), args.begin(), args.end());
    return test::RunProcess(argv, "");
  }

  int ResolveRequests() const {
    int n = 0;
    for (const auto& r : hub_.requests()) n += r.path.find("/resolve/") != std::string::npos;
    return n;
  }

  // The installed copy is exactly the published model at `commit`.
  void ExpectInstalled(const std::string& commit, const std::map<std::string, std::string>& files) {
    for (const auto& [name, bytes] : files) {
      ASSERT_TRUE(fs::exists(model_dir_ + "/" + name)) << name;
      EXPECT_TRUE(test::ReadFile(model_dir_ + "/" + name) == bytes) << name;
    }
    auto lock = nlohmann::json::parse(test::ReadFile(model_dir_ + "/tessera-lock.json"));
    EXPECT_EQ(lock["commit"], commit);
    EXPECT_EQ(lock["repo"], kRepo);
    EXPECT_EQ(lock["files"].size(), files.size());
    for (const auto& f : lock["files"]) {
      const std::string name = f["path"];
      ASSERT_TRUE(files.count(name)) << name;
      EXPECT_EQ(f["size"], files.at(name).size());
      EXPECT_EQ(f["sha256"], Sha256Hex(files.at(name)));
    }
  }

  // The pull's lock file is removed when the pull ends, however it ends.
  void ExpectNoPullLockLeft() {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(models_, ec)) {
      EXPECT_FALSE(entry.path().filename().string().starts_with(".pull-")) << entry.path();
    }
  }

  test::TempDir tmp_;
  test::FakeHub hub_;
  std::map<std::string, std::string> files_;
  std::string models_;
  std::string model_dir_;
};

TEST_F(PullTest, FullDownloadThenAlreadyCurrentThenForce) {
  auto r = Tessera({"pull", kRepo});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("pulled"), std::string::npos) << r.out;
  ExpectInstalled(kCommitA, files_);
  EXPECT_FALSE(fs::exists(model_dir_ + "/pytorch_model.bin"));
  EXPECT_FALSE(fs::exists(model_dir_ + "/README.md"));
  EXPECT_FALSE(fs::exists(models_ + "/escape.json"));
  EXPECT_FALSE(fs::exists(models_ + "/.staging-" + std::string(kStoreName)));
  EXPECT_EQ(ResolveRequests(), static_cast<int>(files_.size()));
  EXPECT_NE(r.err.find("verified " + std::string(kShard1)), std::string::npos) << r.err;
  ExpectNoPullLockLeft();

  r = Tessera({"pull", kRepo});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("already current"), std::string::npos) << r.out;
  EXPECT_EQ(ResolveRequests(), static_cast<int>(files_.size()));  // nothing downloaded

  r = Tessera({"pull", kRepo, "--force"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ResolveRequests(), 2 * static_cast<int>(files_.size()));
  ExpectInstalled(kCommitA, files_);

  // The pulled model runs, is listed as verified, resolves by name and can be removed.
  r = Tessera({"generate", "--model", model_dir_, "--prompt-ids", "1,2,3", "--max-tokens", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Tessera({"list", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto listed = nlohmann::json::parse(r.out);
  ASSERT_EQ(listed.size(), 1u) << r.out;
  EXPECT_EQ(listed[0]["name"], kRepo);  // the name `pull` took, which resolve and rm accept
  EXPECT_EQ(listed[0]["verification"], "verified");
  EXPECT_EQ(listed[0]["location"], "store");
  EXPECT_EQ(listed[0]["dtype"], "float32");
  EXPECT_GT(listed[0]["size_bytes"].get<uint64_t>(), files_[kShard1].size());
  r = Tessera({"resolve", kRepo});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, model_dir_ + "\tstore\n");
  r = Tessera({"rm", kRepo});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(model_dir_));
  r = Tessera({"rm", kRepo});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tessera list"), std::string::npos) << r.err;
}

TEST_F(PullTest, InterruptedDownloadResumesWithRange) {
  hub_.DropConnectionOnce(kRepo, kShard1, 50000);
  auto r = Tessera({"pull", kRepo});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("resuming " + std::string(kShard1) + " from byte 50000"), std::string::npos)
      << r.err;
  ExpectInstalled(kCommitA, files_);
  std::vector<std::string> ranges;
  for (const auto& req : hub_.requests()) {
    if (req.path.ends_with(kShard1)) ranges.push_back(req.range);
  }
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0], "");
  EXPECT_EQ(ranges[1], "bytes=50000-");
  // Nothing was sent twice: the resumed request carried only the rest of the file.
  uint64_t total = 0;
  for (const auto& [name, bytes] : files_) total += bytes.size();
  EXPECT_EQ(hub_.bytes_served(), total);
}

TEST_F(PullTest, CorruptedFileIsRejectedAndThePreviousCopyStays) {
  ASSERT_EQ(Tessera({"pull", kRepo}).exit_code, 0);
  // A new commit whose weights arrive with one byte flipped.
  auto updated = files_;
  updated[kShard1][1000] ^= 0x55;
  hub_.AddModel(kRepo, kCommitB, updated);
  std::string corrupted = updated[kShard1];
  corrupted[corrupted.size() / 2] ^= 0x01;
  hub_.ServeInstead(kRepo, kShard1, corrupted);
  auto r = Tessera({"pull", kRepo});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(std::string(kShard1) + " failed verification (sha256"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("installed copy untouched"), std::string::npos) << r.err;
  ExpectInstalled(kCommitA, files_);  // the previous good copy, byte for byte

  // Once the hub serves the right bytes the update goes through.
  hub_.ServeInstead(kRepo, kShard1, updated[kShard1]);
  r = Tessera({"pull", kRepo});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectInstalled(kCommitB, updated);
  // Files unchanged between the commits were taken from the installed copy.
  EXPECT_NE(r.out.find(": 1 downloaded"), std::string::npos) << r.out;
}

TEST_F(PullTest, WrongSizesAreRejected) {
  hub_.ServeInstead(kRepo, kShard1, files_[kShard1] + "trailing bytes");
  auto r = Tessera({"pull", kRepo});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("larger than the hub says"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(model_dir_));

  hub_.ServeInstead(kRepo, kShard1, files_[kShard1].substr(0, 1000));
  r = Tessera({"pull", kRepo});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("received 1000 bytes but the hub says"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(model_dir_));
}

TEST_F(PullTest, NotFoundOnTheHub) {
  auto r = Tessera({"pull", "test-org/absent"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not found on the hub (HTTP 404)"), std::string::npos) << r.err;
  hub_.MissingFile(kRepo, "tokenizer.json");
  r = Tessera({"pull", kRepo});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tokenizer.json was not found on the hub (HTTP 404)"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(model_dir_));
  ExpectNoPullLockLeft();
}

TEST_F(PullTest, GatedModelNeedsTheToken) {
  hub_.RequireToken("s3cret");
  auto r = Tessera({"pull", kRepo});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("HTTP 401"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("set HF_TOKEN"), std::string::npos) << r.err;
  r = Tessera({"pull", kRepo}, "wrong");
  EXPECT_NE(r.err.find("HF_TOKEN was sent but does not give access"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(model_dir_));
  r = Tessera({"pull", kRepo}, "s3cret");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectInstalled(kCommitA, files_);
}

TEST_F(PullTest, StalledServerTimesOutWithAClearMessage) {
  hub_.StallAfter(kRepo, kShard1, 20000);
  auto begin = std::chrono::steady_clock::now();
  auto r = Tessera({"pull", kRepo, "--timeout", "2"});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("download of " + std::string(kShard1) + " stalled: no data for 2 s"),
            std::string::npos)
      << r.err;
  // The timeout counts from the last byte received, not from an average over a window.
  EXPECT_GE(seconds, 1.9);
  EXPECT_LT(seconds, 6.0);
  EXPECT_FALSE(fs::exists(model_dir_));
}

TEST_F(PullTest, HubThatNeverAnswersTimesOut) {
  hub_.StallFileList();
  auto begin = std::chrono::steady_clock::now();
  auto r = Tessera({"pull", kRepo, "--timeout", "2"});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("fetching the file list of test-org/tiny@main stalled: no data for 2 s"),
            std::string::npos)
      << r.err;
  EXPECT_GE(seconds, 1.9);
  EXPECT_LT(seconds, 6.0);
}

TEST_F(PullTest, CtrlCKeepsThePreviousCopyAndTheNextPullResumes) {
  ASSERT_EQ(Tessera({"pull", kRepo}).exit_code, 0);
  auto updated = files_;
  updated[kShard1][1000] ^= 0x55;
  hub_.AddModel(kRepo, kCommitB, updated);
  hub_.StallAfter(kRepo, kShard1, 30000);
  // SIGINT after two seconds; the download is stalled by then (the stall lasts until the hub
  // is destroyed), so the signal always lands mid-pull.
  std::vector<std::string> argv = {"timeout",
                                   "--preserve-status",
                                   "-s",
                                   "INT",
                                   "2",
                                   "env",
                                   "HF_ENDPOINT=" + hub_.endpoint(),
                                   "TESSERA_MODELS=" + models_,
                                   "HF_HOME=" + tmp_.File("hf"),
                                   test::TesseraBinary(),
                                   "pull",
                                   kRepo};
  auto r = test::RunProcess(argv, "");
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_NE(r.err.find("interrupted"), std::string::npos) << r.err;
  ExpectInstalled(kCommitA, files_);
  ExpectNoPullLockLeft();

  hub_.StallAfter(kRepo, kShard1, std::string::npos);  // the hub recovers
  r = Tessera({"pull", kRepo});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("resuming " + std::string(kShard1) + " from byte 30000"), std::string::npos)
      << r.err;
  ExpectInstalled(kCommitB, updated);
}

TEST_F(PullTest, ProgressBarOnATerminalPlainLinesOtherwise) {
  auto r = Tessera({"pull", kRepo});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;  // plain lines into a pipe
  EXPECT_NE(r.err.find("downloading " + std::string(kShard1)), std::string::npos) << r.err;

  // script(1) gives the pull a pseudo-terminal; its output ends up in the typescript file.
  std::string command = "env HF_ENDPOINT=" + hub_.endpoint() + " TESSERA_MODELS=" + models_ + " " +
                        test::TesseraBinary() + " pull " + kRepo + " --force";
  r = test::RunProcess({"script", "-qec", command, tmp_.File("typescript")}, "");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string screen = test::ReadFile(tmp_.File("typescript"));
  // One line redrawn per file (base/progress.h), ending on its final state with the rate.
  EXPECT_NE(screen.find("\r" + std::string(kShard1) + "  ["), std::string::npos) << screen;
  EXPECT_NE(screen.find("\r" + std::string(kShard1) + ": done, "), std::string::npos) << screen;
  EXPECT_NE(screen.find("/s)"), std::string::npos) << screen;
  ExpectInstalled(kCommitA, files_);
}

// `list --catalog` says in words what each entry pins, and why not, then the entries' notes.
TEST_F(PullTest, CatalogListingSaysWhatIsPinned) {
  auto r = Tessera({"list", "--catalog"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("(unverified)"), std::string::npos) << r.out;
  for (const char* id : {"qwen3-0.6b", "decider-0.8b", "gemma-3-1b-it", "qwen3guard-gen-4b"}) {
    const size_t at = r.out.find(std::string("\n") + id + " ");
    ASSERT_NE(at, std::string::npos) << id;
    const std::string line = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
    EXPECT_NE(line.find("follows main; not pinned (catalog written offline)"), std::string::npos)
        << line;
  }
  EXPECT_NE(r.out.find("notes:\n  smollm2-135m-sft: "), std::string::npos) << r.out;
  r = Tessera({"list", "--catalog", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 16u);
  for (const auto& row : rows) {
    EXPECT_EQ(row["pin"], "follows main; not pinned (catalog written offline)") << row.dump();
    EXPECT_EQ(row["unverified_reason"], "catalog written offline") << row.dump();
  }
}

TEST_F(PullTest, BadNamesAreRefusedBeforeAnyRequest) {
  for (const char* bad : {"../x", "/abs/path", "", "a/b/c", "test-org/..", "x@..", "-rf"}) {
    auto r = Tessera({"pull", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    r = Tessera({"rm", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
  }
  EXPECT_TRUE(hub_.requests().empty());
}

TEST_F(PullTest, HubCacheModelIsListedAndResolvedInPlace) {
  const std::string repo_dir = tmp_.File("hf") + "/hub/models--test-org--cached";
  const std::string snapshot = repo_dir + "/snapshots/" + kCommitA;
  fs::create_directories(repo_dir + "/blobs");
  fs::create_directories(snapshot);
  fs::create_directories(repo_dir + "/refs");
  test::WriteFile(repo_dir + "/refs/main", kCommitA);
  for (const auto& [name, bytes] : files_) {
    const std::string blob = Sha256Hex(bytes);
    test::WriteFile(repo_dir + "/blobs/" + blob, bytes);
    fs::create_symlink("../../blobs/" + blob, snapshot + "/" + name);
  }
  auto r = Tessera({"resolve", "test-org/cached"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, snapshot + "\thf-cache\n");
  r = Tessera({"list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("test-org/cached"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hf-cache"), std::string::npos) << r.out;
  r = Tessera({"generate", "--model", snapshot, "--prompt-ids", "1,2,3", "--max-tokens", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(models_));  // used in place, nothing copied
}

}  // namespace
}  // namespace tessera
