// Runtime packages: convert round trip (identical tensors and logits in the same dtype,
// aligned data), every flipped byte caught, old/new format versions refused with the
// re-convert message, the warm-start verification cache, atomic replacement.
#include "catalog/package.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/half.h"
#include "base/sha256.h"
#include "catalog/catalog.h"
#include "catalog/model_store.h"
#include "format/safetensors.h"
#include "model/synthetic_checkpoint.h"
#include "test_support.h"

namespace tessera {
namespace {
namespace fs = std::filesystem;

class PackageTest : public ::testing::Test {
 protected:
  void MakeSource(DType dtype, int shards = 1) {
    SyntheticModelSpec spec;
    spec.vocab = 512;
    spec.dtype = dtype;
    spec.shards = shards;
    fs::create_directories(source_);
    ASSERT_TRUE(WriteSyntheticModel(source_, spec).ok());
  }

  // Flips one byte in place (same size, same inode).
  static void FlipByte(const std::string& path, size_t at) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char c = 0;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(at));
    f.put(static_cast<char>(c ^ 0x20));
  }

  test::ProcessResult Generate(const std::string& dir) {
    return test::RunTessera({"generate", "--model", dir, "--prompt-ids", "5,6,7,8", "--max-tokens",
                             "4", "--json", "--top-logits", "8"});
  }

  test::TempDir tmp_;
  std::string source_ = tmp_.File("source");
  std::string package_ = tmp_.File("pkg");
};

TEST_F(PackageTest, Bf16RoundTripIsExactAlignedAndGivesIdenticalLogits) {
  MakeSource(DType::kBF16, /*shards=*/2);
  ASSERT_TRUE(ConvertToPackage(source_, package_, {}).ok());
  auto info = VerifyPackage(package_);
  ASSERT_TRUE(info) << info.status().message();
  EXPECT_EQ(info->dtype, "bf16");
  EXPECT_EQ(info->architecture, "llama");

  auto source = CheckpointTensors::Open(source_);
  ASSERT_TRUE(source);
  auto packed = SafetensorsFile::Open(package_ + "/model.safetensors");
  ASSERT_TRUE(packed) << packed.status().message();
  ASSERT_EQ(packed->tensors().size(), source->size());
  for (const auto& t : packed->tensors()) {
    const TensorInfo* s = source->Find(t.name);
    ASSERT_NE(s, nullptr) << t.name;
    EXPECT_EQ(t.shape, s->shape);
    ASSERT_EQ(t.data.size(), s->data.size()) << t.name;
    EXPECT_EQ(std::memcmp(t.data.data(), s->data.data(), t.data.size()), 0) << t.name;
    // mmap bases are page aligned, so this is the offset in the file modulo 64.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data.data()) % 64, 0u) << t.name;
  }

  auto from_source = Generate(source_);
  auto from_package = Generate(package_);
  ASSERT_EQ(from_source.exit_code, 0) << from_source.err;
  ASSERT_EQ(from_package.exit_code, 0) << from_package.err;
  auto a = nlohmann::json::parse(from_source.out);
  auto b = nlohmann::json::parse(from_package.out);
  ASSERT_EQ(a["top_logits"].size(), 4u) << from_source.out;  // one entry per generated token
  EXPECT_EQ(a["generated_ids"], b["generated_ids"]);
  EXPECT_EQ(a["top_logits"], b["top_logits"]);  // exact, not approximate

  // The manifest records the source files with their hashes.
  auto manifest = nlohmann::json::parse(test::ReadFile(package_ + "/tessera-package.json"));
  EXPECT_EQ(manifest["format_version"], kPackageFormatVersion);
  bool saw_shard = false;
  for (const auto& f : manifest["source"]["files"]) {
    EXPECT_EQ(f["sha256"], *Sha256File(source_ + "/" + f["path"].get<std::string>()));
    saw_shard |= f["path"] == "model-00001-of-00002.safetensors";
  }
  EXPECT_TRUE(saw_shard);
}

TEST_F(PackageTest, F32SourceToBf16RoundsToNearestEven) {
  MakeSource(DType::kF32);
  PackageOptions options;
  options.dtype = PackageDType::kBF16;
  ASSERT_TRUE(ConvertToPackage(source_, package_, options).ok());
  auto source = CheckpointTensors::Open(source_);
  auto packed = SafetensorsFile::Open(package_ + "/model.safetensors");
  ASSERT_TRUE(source && packed);
  for (const auto& t : packed->tensors()) {
    ASSERT_EQ(t.dtype, DType::kBF16);
    const TensorInfo* s = source->Find(t.name);
    std::vector<float> values(s->num_elements);
    ASSERT_TRUE(CopyTensorToF32(*s, values).ok());
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t got = static_cast<uint16_t>(t.data[2 * i] | (t.data[2 * i + 1] << 8));
      ASSERT_EQ(got, FloatToBf16(values[i])) << t.name << "[" << i << "]";
    }
  }
  // f32 -> f32 is the identity, so logits match the source exactly.
  options.dtype = PackageDType::kF32;
  ASSERT_TRUE(ConvertToPackage(source_, tmp_.File("pkg32"), options).ok());
  auto a = Generate(source_);
  auto b = Generate(tmp_.File("pkg32"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(nlohmann::json::parse(a.out)["top_logits"], nlohmann::json::parse(b.out)["top_logits"]);
}

TEST_F(PackageTest, AFlippedByteAnywhereIsCaught) {
  MakeSource(DType::kBF16);
  ASSERT_TRUE(ConvertToPackage(source_, package_, {}).ok());
  ASSERT_TRUE(VerifyPackage(package_));
  int files = 0;
  for (const auto& entry : fs::directory_iterator(package_)) {
    const std::string name = entry.path().filename().string();
    if (name == ".tessera-verified.json") continue;  // a cache, not part of the package
    ++files;
    const size_t size = fs::file_size(entry.path());
    for (size_t at : {size_t{0}, size / 3, size / 2, size - 1}) {
      FlipByte(entry.path().string(), at);
      auto verified = VerifyPackage(package_);
      EXPECT_FALSE(verified) << name << " byte " << at;
      if (!verified) {
        EXPECT_NE(verified.status().message().find("re-convert"), std::string::npos)
            << verified.status().message();
      }
      FlipByte(entry.path().string(), at);  // restore
      ASSERT_TRUE(VerifyPackage(package_)) << name << " byte " << at;
    }
  }
  EXPECT_GE(files, 6);  // manifest, its hash, tensors, config, generation config, tokenizer...
  // Resolution refuses a damaged package too.
  FlipByte(package_ + "/model.safetensors", 100);
  auto catalog = BuiltinCatalog();
  ASSERT_TRUE(catalog);
  EXPECT_FALSE(ResolveModel(package_, **catalog));
}

TEST_F(PackageTest, OldAndNewFormatVersionsAreRefusedWithTheReconvertMessage) {
  MakeSource(DType::kBF16);
  ASSERT_TRUE(ConvertToPackage(source_, package_, {}).ok());
  const std::string manifest_path = package_ + "/tessera-package.json";
  auto manifest = nlohmann::json::parse(test::ReadFile(manifest_path));
  for (int version : {0, kPackageFormatVersion + 1}) {
    manifest["format_version"] = version;
    const std::string text = manifest.dump(2) + "\n";
    test::WriteFile(manifest_path, text);
    test::WriteFile(package_ + "/tessera-package.sha256", Sha256Hex(text) + "\n");
    auto verified = VerifyPackage(package_);
    ASSERT_FALSE(verified);
    const std::string message = verified.status().message();
    EXPECT_NE(message.find("format " + std::to_string(version)), std::string::npos) << message;
    EXPECT_NE(message.find("re-convert it: tessera convert " + fs::absolute(source_).string()),
              std::string::npos)
        << message;
  }
}

TEST_F(PackageTest, WarmStartsSkipRehashingUnchangedFiles) {
  MakeSource(DType::kBF16);
  ASSERT_TRUE(ConvertToPackage(source_, package_, {}).ok());
  // Fresh files are "racy" (modified too close to verification to trust their mtime).
  auto first = VerifyPackage(package_);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->files_cached, 0);
  auto again = VerifyPackage(package_);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->files_cached, 0);
  // Files last written an hour ago are trusted from the cache once verified.
  for (const auto& entry : fs::directory_iterator(package_)) {
    fs::last_write_time(entry.path(), fs::file_time_type::clock::now() - std::chrono::hours(1));
  }
  auto cold = VerifyPackage(package_);
  ASSERT_TRUE(cold);
  EXPECT_GT(cold->files_hashed, 0);
  auto warm = VerifyPackage(package_);
  ASSERT_TRUE(warm);
  EXPECT_EQ(warm->files_hashed, 0);
  EXPECT_EQ(warm->files_cached, cold->files_hashed + cold->files_cached);
  // A write changes the mtime, so the change is hashed and caught.
  FlipByte(package_ + "/model.safetensors", 200);
  EXPECT_FALSE(VerifyPackage(package_));
}

TEST_F(PackageTest, ReplacesAPackageAtomicallyAndRefusesOtherDestinations) {
  MakeSource(DType::kBF16);
  ASSERT_TRUE(ConvertToPackage(source_, package_, {}).ok());
  PackageOptions f32;
  f32.dtype = PackageDType::kF32;
  ASSERT_TRUE(ConvertToPackage(source_, package_, f32).ok());
  auto info = VerifyPackage(package_);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->dtype, "f32");
  for (const auto& entry : fs::directory_iterator(tmp_.path())) {
    EXPECT_EQ(entry.path().filename().string().find("staging"), std::string::npos);
  }
  // A directory that is not a package is never overwritten.
  fs::create_directories(tmp_.File("precious"));
  test::WriteFile(tmp_.File("precious/notes.txt"), "keep");
  Status st = ConvertToPackage(source_, tmp_.File("precious"), {});
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(test::ReadFile(tmp_.File("precious/notes.txt")), "keep");
  // A broken source leaves no package and no staging behind.
  test::WriteFile(source_ + "/model.safetensors", "garbage");
  EXPECT_FALSE(ConvertToPackage(source_, tmp_.File("pkg2"), {}).ok());
  EXPECT_FALSE(fs::exists(tmp_.File("pkg2")));
}

TEST_F(PackageTest, ConvertCommandLine) {
  MakeSource(DType::kBF16);
  auto r = test::RunTessera({"convert", source_, package_, "--dtype", "int8"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not supported yet"), std::string::npos) << r.err;
  r = test::RunTessera({"convert", source_});
  EXPECT_EQ(r.exit_code, 2);
  r = test::RunTessera({"convert", source_, package_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("converted"), std::string::npos);
  r = test::RunTessera({"resolve", package_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // A package in the store is listed with its dtype and verification.
  ASSERT_EQ(test::RunTessera({"convert", source_, tmp_.File("models/tiny-f32"), "--dtype", "f32"})
                .exit_code,
            0);
  r = test::RunProcess({"env", "TESSERA_MODELS=" + tmp_.File("models"),
                        "HF_HOME=" + tmp_.File("hf"), test::TesseraBinary(), "list", "--json"},
                       "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto listed = nlohmann::json::parse(r.out);
  ASSERT_EQ(listed.size(), 1u) << r.out;
  EXPECT_EQ(listed[0]["name"], "tiny-f32");
  EXPECT_EQ(listed[0]["dtype"], "f32");
  EXPECT_EQ(listed[0]["verification"], "verified");
  FlipByte(tmp_.File("models/tiny-f32/model.safetensors"), 1000);
  r = test::RunProcess({"env", "TESSERA_MODELS=" + tmp_.File("models"),
                        "HF_HOME=" + tmp_.File("hf"), test::TesseraBinary(), "list", "--json"},
                       "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)[0]["verification"].get<std::string>().rfind("changed", 0),
            0u)
      << r.out;
  FlipByte(package_ + "/config.json", 3);
  r = test::RunTessera({"resolve", package_});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("config.json in the package"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tessera
