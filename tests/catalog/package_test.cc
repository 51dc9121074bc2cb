// Runtime packages: convert round trip in every format (panels identical to packing at load,
// other tensors byte-identical, identical logits, aligned data, mapped in place), a tied
// embedding stored once (as the packed head), format and
// backend refusals, a wrongly sized packed buffer refused, every flipped byte caught, old/new
// format versions refused with the re-convert message, the warm-start verification cache, atomic
// replacement.
#include "catalog/package.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_weights.h"
#include "base/half.h"
#include "base/sha256.h"
#include "catalog/catalog.h"
#include "catalog/model_store.h"
#include "format/model_kind.h"
#include "format/safetensors.h"
#include "model/checkpoint.h"
#include "model/synthetic_checkpoint.h"
#include "test_support.h"

namespace tessera {
namespace {
namespace fs = std::filesystem;

class PackageTest : public ::testing::Test {
 protected:
  // Tied by default, like the synthetic presets; the exactness tests use untied models, whose
  // packages hold exactly what loading the source does (a tied package looks tokens up in the
  // packed head, see TiedEmbeddingIsStoredOnceAsThePackedHead).
  void MakeSource(DType dtype, int shards = 1, bool tied = true) {
    SyntheticModelSpec spec;
    spec.vocab = 512;
    spec.dtype = dtype;
    spec.shards = shards;
    spec.tied = tied;
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

  // With the package cache off, so a source directory is loaded as it is (not converted).
  test::ProcessResult Generate(const std::string& dir, const std::string& dtype) {
    return test::RunProcess({"env", "TESSERA_PACKAGE_CACHE=off", test::TesseraBinary(), "generate",
                             "--model", dir, "--prompt-ids", "5,6,7,8", "--max-tokens", "4",
                             "--json", "--top-logits", "8", "--dtype", dtype},
                            "");
  }

  test::TempDir tmp_;
  std::string source_ = tmp_.File("source");
  std::string package_ = tmp_.File("pkg");
};

// Every package tensor: 64-byte aligned; copied tensors equal the source's bytes; packed
// panels equal what the CPU backend packs from the source at load.
void ExpectPackageMatchesSource(const std::string& source_dir, const std::string& package_dir,
                                WeightFormat format) {
  auto source = OpenCheckpoint(source_dir);
  auto package = OpenCheckpoint(package_dir);
  ASSERT_TRUE(source) << source.status().message();
  ASSERT_TRUE(package) << package.status().message();
  const ModelTensors& s = (*source)->tensors;
  const ModelTensors& p = (*package)->tensors;
  ASSERT_TRUE(p.packed.has_value());
  EXPECT_FALSE(s.packed.has_value());
  EXPECT_EQ(p.packed->format, WeightFormatName(format));
  auto same_bytes = [](const TensorRef& ra, const TensorRef& rb) {
    const TensorInfo* a = ra.info;
    const TensorInfo* b = rb.info;
    EXPECT_EQ(ra.offset, rb.offset);
    EXPECT_EQ(ra.scale, rb.scale);
    ASSERT_EQ(a == nullptr, b == nullptr);
    if (a == nullptr) return;
    EXPECT_EQ(a->name, b->name);
    EXPECT_EQ(a->dtype, b->dtype) << a->name;
    EXPECT_EQ(a->shape, b->shape) << a->name;
    ASSERT_EQ(a->data.size(), b->data.size()) << a->name;
    EXPECT_EQ(std::memcmp(a->data.data(), b->data.data(), a->data.size()), 0) << a->name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data.data()) % 64, 0u) << b->name;
  };
  if ((*source)->config.tie_word_embeddings) {
    EXPECT_EQ(p.embed.info, nullptr);  // stored once, as the packed head
  } else {
    same_bytes(s.embed, p.embed);
  }
  same_bytes(s.final_norm, p.final_norm);
  ASSERT_EQ(s.layers.size(), p.layers.size());
  auto same_panels = [](const PackedMatrix& a, const PackedMatrix& b, const std::string& what) {
    EXPECT_FALSE(a.data.borrowed()) << what;
    EXPECT_TRUE(b.data.borrowed()) << what;  // mapped in place, not copied
    EXPECT_EQ(a.rows, b.rows) << what;
    EXPECT_EQ(a.cols, b.cols) << what;
    auto eq = [&](const auto& x, const auto& y, const char* part) {
      ASSERT_EQ(x.size(), y.size()) << what << " " << part;
      EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(*x.data())), 0)
          << what << " " << part;
    };
    eq(a.data, b.data, "data");
    eq(a.row_scale, b.row_scale, "row_scale");
    eq(a.row_offset, b.row_offset, "row_offset");
    eq(a.block_scale, b.block_scale, "block_scale");
  };
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const LayerTensors& a = s.layers[i];
    const LayerTensors& b = p.layers[i];
    for (auto [x, y] : {std::pair{a.input_norm, b.input_norm},
                        {a.post_attn_norm, b.post_attn_norm},
                        {a.q_bias, b.q_bias},
                        {a.k_bias, b.k_bias},
                        {a.v_bias, b.v_bias},
                        {a.o_bias, b.o_bias},
                        {a.q_norm, b.q_norm},
                        {a.k_norm, b.k_norm}}) {
      same_bytes(x, y);
    }
    EXPECT_EQ(b.q_proj.info, nullptr);
    auto from_source = LoadCpuLayerWeights(**source, static_cast<int64_t>(i), format);
    auto from_package = LoadCpuLayerWeights(**package, static_cast<int64_t>(i), format);
    ASSERT_TRUE(from_source && from_package) << from_package.status().message();
    for (CpuMatrix m : kCpuLayerMatrices) {
      same_panels(CpuLayerMatrix(*from_source, m), CpuLayerMatrix(*from_package, m),
                  "layer " + std::to_string(i) + " " + std::string(CpuMatrixName(m)));
    }
    EXPECT_EQ(from_source->qkv_bias, from_package->qkv_bias);
  }
  auto head_a = LoadCpuHeadMatrix(**source, format);
  auto head_b = LoadCpuHeadMatrix(**package, format);
  ASSERT_TRUE(head_a && head_b) << head_b.status().message();
  same_panels(*head_a, *head_b, "lm_head");
}

TEST_F(PackageTest, RoundTripInEveryFormatIsExactAndGivesIdenticalLogits) {
  MakeSource(DType::kBF16, /*shards=*/2, /*tied=*/false);
  for (WeightFormat format : {WeightFormat::kBF16, WeightFormat::kInt8, WeightFormat::kInt4}) {
    const std::string name(WeightFormatName(format));
    SCOPED_TRACE(name);
    const std::string dest = tmp_.File("pkg-" + name);
    PackageOptions options;
    options.weights = format;
    Status converted = ConvertToPackage(source_, dest, options);
    ASSERT_TRUE(converted.ok()) << converted.message();
    auto info = VerifyPackage(dest);
    ASSERT_TRUE(info) << info.status().message();
    EXPECT_EQ(info->dtype, name);
    EXPECT_EQ(info->architecture, "llama");
    ExpectPackageMatchesSource(source_, dest, format);

    // The source run in the same format and the package (its own format) agree exactly.
    auto from_source = Generate(source_, name);
    auto from_package = Generate(dest, "auto");
    ASSERT_EQ(from_source.exit_code, 0) << from_source.err;
    ASSERT_EQ(from_package.exit_code, 0) << from_package.err;
    auto a = nlohmann::json::parse(from_source.out);
    auto b = nlohmann::json::parse(from_package.out);
    ASSERT_EQ(a["top_logits"].size(), 4u) << from_source.out;  // one entry per token
    EXPECT_EQ(a["generated_ids"], b["generated_ids"]);
    EXPECT_EQ(a["top_logits"], b["top_logits"]);  // exact, not approximate

    // The manifest records the source files with their hashes.
    auto manifest = nlohmann::json::parse(test::ReadFile(dest + "/tessera-package.json"));
    EXPECT_EQ(manifest["format_version"], kPackageFormatVersion);
    EXPECT_EQ(manifest["packed_layout"], kCpuPanelLayout);
    bool saw_shard = false;
    for (const auto& f : manifest["source"]["files"]) {
      EXPECT_EQ(f["sha256"], *Sha256File(source_ + "/" + f["path"].get<std::string>()));
      saw_shard |= f["path"] == "model-00001-of-00002.safetensors";
    }
    EXPECT_TRUE(saw_shard);
  }
}

TEST_F(PackageTest, F32SourceKeepsItsTensorsAndPacksF32OrBf16Exactly) {
  MakeSource(DType::kF32, 1, /*tied=*/false);
  for (WeightFormat format : {WeightFormat::kF32, WeightFormat::kBF16}) {
    const std::string name(WeightFormatName(format));
    SCOPED_TRACE(name);
    PackageOptions options;
    options.weights = format;
    ASSERT_TRUE(ConvertToPackage(source_, tmp_.File("pkg-" + name), options).ok());
    ExpectPackageMatchesSource(source_, tmp_.File("pkg-" + name), format);
    auto a = Generate(source_, name);
    auto b = Generate(tmp_.File("pkg-" + name), "auto");
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(nlohmann::json::parse(a.out)["top_logits"],
              nlohmann::json::parse(b.out)["top_logits"]);
  }
  // kAuto takes the source's precision.
  ASSERT_TRUE(ConvertToPackage(source_, package_, {.weights = WeightFormat::kAuto}).ok());
  EXPECT_EQ(VerifyPackage(package_)->dtype, "f32");
}

// A tied model's package holds no plain embedding: the tensor file is smaller by exactly the
// embedding (and its alignment padding), token lookups read the packed head's rows (the
// placement log says so), and in BF16 of a BF16 source the logits stay identical to the source's.
TEST_F(PackageTest, TiedEmbeddingIsStoredOnceAsThePackedHead) {
  MakeSource(DType::kBF16);
  auto source = OpenCheckpoint(source_);
  ASSERT_TRUE(source);
  const uint64_t embed_bytes = (*source)->tensors.embed->data.size();
  for (WeightFormat format : {WeightFormat::kBF16, WeightFormat::kInt8, WeightFormat::kInt4}) {
    const std::string name(WeightFormatName(format));
    SCOPED_TRACE(name);
    const std::string dest = tmp_.File("pkg-" + name);
    ASSERT_TRUE(ConvertToPackage(source_, dest, {.weights = format}).ok());
    ASSERT_TRUE(VerifyPackage(dest));
    ExpectPackageMatchesSource(source_, dest, format);
    auto package = OpenCheckpoint(dest);
    ASSERT_TRUE(package);
    EXPECT_EQ((*package)->tensors.embed.info, nullptr);
    const std::string header = test::ReadFile(dest + "/model.safetensors").substr(0, 8192);
    EXPECT_EQ(header.find("model.embed_tokens.weight"), std::string::npos);
    EXPECT_NE(header.find("tessera.lm_head.data"), std::string::npos);

    auto from_source = Generate(source_, name);
    auto from_package = Generate(dest, "auto");
    ASSERT_EQ(from_source.exit_code, 0) << from_source.err;
    ASSERT_EQ(from_package.exit_code, 0) << from_package.err;
    EXPECT_NE(from_package.err.find("token embedding: rows of the tied LM head on cpu-"),
              std::string::npos)
        << from_package.err;
    EXPECT_NE(from_source.err.find("token embedding: model.embed_tokens.weight (BF16, host)"),
              std::string::npos)
        << from_source.err;
    if (format == WeightFormat::kBF16) {
      EXPECT_EQ(nlohmann::json::parse(from_source.out)["top_logits"],
                nlohmann::json::parse(from_package.out)["top_logits"]);
    }
  }
  // Against the same model untied (an lm_head the size of the embedding): the tied package is
  // smaller by the embedding alone.
  const std::string untied = tmp_.File("untied");
  {
    SyntheticModelSpec spec;
    spec.vocab = 512;
    spec.dtype = DType::kBF16;
    spec.tied = false;
    ASSERT_TRUE(WriteSyntheticModel(untied, spec).ok());
  }
  ASSERT_TRUE(
      ConvertToPackage(untied, tmp_.File("untied-pkg"), {.weights = WeightFormat::kInt8}).ok());
  const auto tied_size = fs::file_size(tmp_.File("pkg-int8/model.safetensors"));
  const auto untied_size = fs::file_size(tmp_.File("untied-pkg/model.safetensors"));
  ASSERT_GT(untied_size, tied_size);
  EXPECT_GE(untied_size - tied_size, embed_bytes);
  // plus its header entry and alignment padding
  EXPECT_LT(untied_size - tied_size, embed_bytes + 256);
}

TEST_F(PackageTest, TaskModelsKeepWhatTheyAreRecognisedBy) {
  // An embedding model's sentence-transformers files and a classifier's labels travel with the
  // package, so the package is served as the same kind as its source.
  SyntheticModelSpec embed;
  embed.family = ModelFamily::kQwen3;
  embed.vocab = 4352;
  embed.sentence_transformers = true;
  SyntheticModelSpec cls = embed;
  cls.sentence_transformers = false;
  cls.class_labels = {"no", "yes"};
  for (const auto& [name, spec] : {std::pair{"embed", embed}, std::pair{"cls", cls}}) {
    const std::string src = tmp_.File(std::string(name) + "-src");
    const std::string dst = tmp_.File(std::string(name) + "-pkg");
    ASSERT_TRUE(WriteSyntheticModel(src, spec).ok());
    ASSERT_TRUE(ConvertToPackage(src, dst, {.weights = WeightFormat::kInt8}).ok());
    ASSERT_TRUE(VerifyPackage(dst)) << name;
    auto before = DetectModelKind(src);
    auto after = DetectModelKind(dst);
    ASSERT_TRUE(before && after) << name;
    EXPECT_EQ(after->kind, before->kind) << name;
    EXPECT_EQ(after->prompts, before->prompts);
    EXPECT_EQ(after->normalize, before->normalize);
    EXPECT_EQ(after->labels, before->labels);
    auto ckpt = OpenCheckpoint(dst);
    ASSERT_TRUE(ckpt) << ckpt.status().message();
    EXPECT_EQ(static_cast<bool>((*ckpt)->tensors.score), !spec.class_labels.empty());
  }
  // A damaged module config is caught like any other file.
  const std::string pooling = tmp_.File("embed-pkg") + "/1_Pooling/config.json";
  ASSERT_TRUE(fs::exists(pooling));
  FlipByte(pooling, 3);
  EXPECT_FALSE(VerifyPackage(tmp_.File("embed-pkg")));
}

TEST_F(PackageTest, APackageRunsOnlyInItsFormatAndOnlyOnTheCpuBackend) {
  MakeSource(DType::kBF16);
  ASSERT_TRUE(ConvertToPackage(source_, package_, {.weights = WeightFormat::kInt8}).ok());
  auto other = Generate(package_, "int4");
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find("holds int8 weights, not int4"), std::string::npos) << other.err;
  auto reference = test::RunTessera({"generate", "--model", package_, "--prompt-ids", "5,6",
                                     "--max-tokens", "2", "--placement", "reference"});
  EXPECT_NE(reference.exit_code, 0);
  EXPECT_NE(reference.err.find("reference backend needs the source checkpoint"), std::string::npos)
      << reference.err;
}

TEST_F(PackageTest, PackedTensorsOfTheWrongSizeAreRefusedBeforeUse) {
  MakeSource(DType::kBF16);
  ASSERT_TRUE(ConvertToPackage(source_, package_, {.weights = WeightFormat::kInt4}).ok());
  // Edit the tensor file's header so one packed buffer is a block short (bypassing the
  // manifest, as a bug in a writer would); the header keeps its length, so every other tensor
  // stays where it was. The backend must refuse it, not read past it.
  const std::string damaged = tmp_.File("damaged");
  fs::create_directories(damaged);
  fs::copy_file(package_ + "/config.json", damaged + "/config.json");
  std::string bytes = test::ReadFile(package_ + "/model.safetensors");
  uint64_t header_length = 0;
  for (int i = 0; i < 8; ++i) header_length |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  auto header = nlohmann::ordered_json::parse(bytes.substr(8, header_length));
  auto& entry = header[PackedTensorName(0, "gate_up", "block_scale")];
  entry["shape"][0] = entry["shape"][0].get<int64_t>() - 16;
  entry["data_offsets"][1] = entry["data_offsets"][1].get<uint64_t>() - 32;
  std::string text = header.dump();
  ASSERT_LE(text.size(), header_length);
  text.resize(header_length, ' ');
  test::WriteFile(damaged + "/model.safetensors", bytes.replace(8, header_length, text));
  auto ckpt = OpenCheckpoint(damaged);
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  auto layer = LoadCpuLayerWeights(**ckpt, 0, WeightFormat::kInt4);
  ASSERT_FALSE(layer);
  EXPECT_NE(layer.status().message().find("layer 0 gate_up: packed block scales is"),
            std::string::npos)
      << layer.status().message();
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
  f32.weights = WeightFormat::kF32;
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

// Paths are bytes, the manifest is JSON text: a source directory whose path is not UTF-8 still
// converts (the path is only shown in hints), and a model file whose name is not UTF-8 is
// refused by name instead of ending the process.
TEST_F(PackageTest, PathsThatAreNotUtf8AreHandled) {
  source_ = tmp_.File("mod\xe8le");
  MakeSource(DType::kBF16);
  ASSERT_TRUE(ConvertToPackage(source_, package_, {}).ok());
  ASSERT_TRUE(VerifyPackage(package_));
  auto matches = PackageMatchesSource(package_, source_);
  ASSERT_TRUE(matches);
  EXPECT_TRUE(*matches);
  test::WriteFile(source_ + "/stray\xff.safetensors", "x");
  Status st = ConvertToPackage(source_, tmp_.File("pkg2"), {});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not valid UTF-8"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(tmp_.File("pkg2")));
}

// An F32 checkpoint converted with no --dtype stays f32 (it used to be rounded to bf16).
TEST_F(PackageTest, ConvertKeepsAnF32CheckpointF32ByDefault) {
  MakeSource(DType::kF32);
  auto r = test::RunTessera({"convert", source_, package_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(VerifyPackage(package_)->dtype, "f32");
  EXPECT_NE(r.out.find("(f32, the checkpoint's own (auto))"), std::string::npos) << r.out;
  r = test::RunTessera({"convert", "--help"});
  EXPECT_NE(r.out.find("F32 stays f32"), std::string::npos) << r.out;
}

TEST_F(PackageTest, ConvertCommandLine) {
  MakeSource(DType::kBF16);
  auto r = test::RunTessera({"convert", source_, package_, "--dtype", "int7"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--dtype: weight format must be auto, f32, bf16, int8 or int4, got 'int7'"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(package_));
  r = test::RunTessera({"convert", source_, tmp_.File("pkg-int4"), "--dtype", "int4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(VerifyPackage(tmp_.File("pkg-int4"))->dtype, "int4");
  r = test::RunTessera({"convert", source_});
  EXPECT_EQ(r.exit_code, 2);
  // The default is auto: a BF16 checkpoint stays bf16, and the output says what was chosen.
  r = test::RunTessera({"convert", source_, package_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("converted"), std::string::npos);
  EXPECT_NE(r.out.find("(bf16, the checkpoint's own (auto))"), std::string::npos) << r.out;
  EXPECT_EQ(VerifyPackage(package_)->dtype, "bf16");
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
  // "tiny-f32" is no catalog id, so no name reaches it: it is listed by its path.
  EXPECT_EQ(listed[0]["name"], tmp_.File("models/tiny-f32"));
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

namespace tessera {
namespace {

class PackageCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticModelSpec spec;
    spec.vocab = 512;
    spec.dtype = DType::kBF16;
    // Untied: its packages compute exactly what the source does in every format, so the
    // logits below tell which weights ran (a tied package looks tokens up in its packed head).
    spec.tied = false;
    fs::create_directories(source_);
    ASSERT_TRUE(WriteSyntheticModel(source_, spec).ok());
  }

  test::ProcessResult Run(const std::string& dtype, const std::string& cache = "on") {
    return test::RunProcess(
        {"env", "TESSERA_MODELS=" + tmp_.File("models"), "TESSERA_PACKAGE_CACHE=" + cache,
         test::TesseraBinary(), "generate", "--model", source_, "--prompt-ids", "5,6,7",
         "--max-tokens", "3", "--json", "--top-logits", "4", "--dtype", dtype},
        "");
  }

  static std::string Logits(const test::ProcessResult& r) {
    return nlohmann::json::parse(r.out)["top_logits"].dump();
  }

  test::TempDir tmp_;
  std::string parent_ = tmp_.File("mine");
  std::string source_ = parent_ + "/my-finetune";
};

TEST_F(PackageCacheTest, ConvertedOnFirstUseBesideTheSourceReusedAndRedoneWhenItChanges) {
  const auto plain = Run("int8", "off");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.err.find("package"), std::string::npos) << plain.err;
  EXPECT_FALSE(fs::exists(source_ + ".tessera-int8"));

  auto first = Run("int8");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find("into the package " + source_ + ".tessera-int8 (first use)"),
            std::string::npos)
      << first.err;
  EXPECT_EQ(VerifyPackage(source_ + ".tessera-int8")->dtype, "int8");
  EXPECT_EQ(Logits(first), Logits(plain));

  auto second = Run("int8");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find("using the package " + source_ + ".tessera-int8"), std::string::npos)
      << second.err;
  EXPECT_EQ(Logits(second), Logits(plain));

  // Another format is another package; auto is the source's own (bf16).
  auto bf16 = Run("auto");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  EXPECT_TRUE(IsPackageDir(source_ + ".tessera-bf16"));

  // A touched but identical source is re-hashed and reused; a changed one is converted again.
  fs::last_write_time(source_ + "/config.json",
                      fs::file_time_type::clock::now() - std::chrono::hours(2));
  auto touched = Run("int8");
  EXPECT_NE(touched.err.find("using the package"), std::string::npos) << touched.err;
  auto config = nlohmann::json::parse(test::ReadFile(source_ + "/config.json"));
  config["rms_norm_eps"] = 1e-3;
  test::WriteFile(source_ + "/config.json", config.dump());
  const auto changed_plain = Run("int8", "off");
  auto changed = Run("int8");
  ASSERT_EQ(changed.exit_code, 0) << changed.err;
  EXPECT_NE(changed.err.find("(the source changed)"), std::string::npos) << changed.err;
  EXPECT_EQ(Logits(changed), Logits(changed_plain));
  EXPECT_NE(Logits(changed), Logits(plain));  // the change matters, and the package follows it
}

TEST_F(PackageCacheTest, AReadOnlySourceIsCachedInTheModelsDirectory) {
  fs::permissions(parent_,
                  fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::remove);
  auto r = Run("int4");
  fs::permissions(parent_, fs::perms::owner_write, fs::perm_options::add);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(source_ + ".tessera-int4"));
  std::vector<std::string> cached;
  for (const auto& e : fs::directory_iterator(tmp_.File("models/.packages"))) {
    cached.push_back(e.path().filename().string());
  }
  ASSERT_EQ(cached.size(), 1u);
  EXPECT_TRUE(cached[0].starts_with("my-finetune-")) << cached[0];
  EXPECT_TRUE(cached[0].ends_with("-tessera-int4")) << cached[0];
  EXPECT_NE(r.err.find(cached[0] + " (first use)"), std::string::npos) << r.err;
  // Listed with its disk use, as a package named by its path (which resolve accepts).
  auto listed =
      test::RunProcess({"env", "TESSERA_MODELS=" + tmp_.File("models"),
                        "HF_HOME=" + tmp_.File("hf"), test::TesseraBinary(), "list", "--json"},
                       "");
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  auto rows = nlohmann::json::parse(listed.out);
  ASSERT_EQ(rows.size(), 1u) << listed.out;
  EXPECT_EQ(rows[0]["location"], "package");
  EXPECT_EQ(rows[0]["name"], tmp_.File("models/.packages/" + cached[0]));
  EXPECT_EQ(rows[0]["dtype"], "int4");
  EXPECT_GT(rows[0]["size_bytes"].get<uint64_t>(), 0u);
}

TEST_F(PackageCacheTest, ADamagedCachedPackageIsReplacedNotUsed) {
  ASSERT_EQ(Run("bf16").exit_code, 0);
  const std::string pkg = source_ + ".tessera-bf16";
  std::string bytes = test::ReadFile(pkg + "/model.safetensors");
  bytes[bytes.size() - 10] ^= 0x40;
  test::WriteFile(pkg + "/model.safetensors", bytes);
  auto r = Run("bf16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("(the cached package was damaged"), std::string::npos) << r.err;
  EXPECT_TRUE(VerifyPackage(pkg));
  EXPECT_EQ(Logits(r), Logits(Run("bf16", "off")));
}

// Every file and folder below `dir`, relative to it, sorted.
std::vector<std::string> Listing(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    out.push_back(fs::relative(e.path(), dir).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The one package in `models`/.packages.
std::string OnlyCachedPackage(const std::string& models) {
  std::vector<std::string> cached;
  for (const auto& e : fs::directory_iterator(models + "/.packages")) {
    cached.push_back(e.path().filename().string());
  }
  return cached.size() == 1 ? cached[0] : "(" + std::to_string(cached.size()) + " packages)";
}

// A folder in TESSERA_READ_ONLY_DIRS is read-only by policy: writable or not, nothing is
// written beside a source inside it; its package goes to the models directory.
TEST_F(PackageCacheTest, ASourceReadOnlyByPolicyIsCachedInTheModelsDirectory) {
  const auto before = Listing(tmp_.path());
  auto r =
      test::RunProcess({"env", "TESSERA_MODELS=" + tmp_.File("models"),
                        "TESSERA_READ_ONLY_DIRS=/nonexistent::" + parent_, test::TesseraBinary(),
                        "generate", "--model", source_, "--prompt-ids", "5,6,7", "--max-tokens",
                        "3", "--json", "--top-logits", "4", "--dtype", "int8"},
                       "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> after;
  for (const std::string& f : Listing(tmp_.path())) {
    if (!f.starts_with("models")) after.push_back(f);
  }
  EXPECT_EQ(after, before) << "written beside a read-only source";
  const std::string cached = OnlyCachedPackage(tmp_.File("models"));
  EXPECT_TRUE(cached.starts_with("my-finetune-") && cached.ends_with("-tessera-int8")) << cached;
  EXPECT_NE(r.err.find(cached + " (first use)"), std::string::npos) << r.err;
  EXPECT_EQ(Logits(r), Logits(Run("int8", "off")));
}

// The test suite leaves the shared data untouched even where its folder is writable (a clean
// clone beside a writable ../shared): a copy of a model in a writable folder, used as tests use
// shared data (through TESSERA_SHARED_DIR and test::RunTessera), gets its package converted on
// first use into the models directory, and nothing appears in the shared folder.
TEST(SharedData, AWritableSharedFolderIsLeftUntouched) {
  test::TempDir tmp;
  const std::string shared = tmp.File("shared");
  fs::create_directories(shared + "/models/tiny");
  SyntheticModelSpec spec;
  spec.vocab = 512;
  Status written = WriteSyntheticModel(shared + "/models/tiny", spec);
  ASSERT_TRUE(written.ok()) << written.message();
  const auto before = Listing(shared);
  // The variables tests run under, pointed at the copy; restored at the end.
  struct EnvGuard {
    std::string name;
    std::optional<std::string> old;
    EnvGuard(std::string n, const std::string& value) : name(std::move(n)) {
      if (const char* v = std::getenv(name.c_str())) old = v;
      ::setenv(name.c_str(), value.c_str(), 1);
    }
    ~EnvGuard() {
      old ? (void)::setenv(name.c_str(), old->c_str(), 1) : (void)::unsetenv(name.c_str());
    }
  };
  EnvGuard shared_dir("TESSERA_SHARED_DIR", shared);
  EnvGuard models("TESSERA_MODELS", tmp.File("models"));
  ASSERT_EQ(test::SharedDir(), shared);
  for (int run = 0; run < 2; ++run) {  // converted, then reused
    auto r = test::RunTessera({"generate", "--model", test::SharedDir() + "/models/tiny",
                               "--prompt-ids", "1,2", "--max-tokens", "2", "--placement", "cpu"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find(tmp.File("models") + "/.packages/tiny-"), std::string::npos) << r.err;
    EXPECT_EQ(Listing(shared), before) << "run " << run << " wrote into the shared folder";
  }
  EXPECT_TRUE(OnlyCachedPackage(tmp.File("models")).starts_with("tiny-"));
}

// A package cached by an older tessera (format 2 kept a tied model's embedding beside its head)
// is converted again, and the run says why.
TEST_F(PackageCacheTest, AnOlderFormatCachedPackageIsConvertedAgain) {
  ASSERT_EQ(Run("int8").exit_code, 0);
  const std::string pkg = source_ + ".tessera-int8";
  auto manifest = nlohmann::json::parse(test::ReadFile(pkg + "/tessera-package.json"));
  manifest["format_version"] = kPackageFormatVersion - 1;
  const std::string text = manifest.dump(2) + "\n";
  test::WriteFile(pkg + "/tessera-package.json", text);
  test::WriteFile(pkg + "/tessera-package.sha256", Sha256Hex(text) + "\n");
  auto r = Run("int8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("(the cached package is in another package format (the package in " + pkg +
                       " uses format " + std::to_string(kPackageFormatVersion - 1)),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(VerifyPackage(pkg));
  EXPECT_EQ(Logits(r), Logits(Run("int8", "off")));
}

}  // namespace
}  // namespace tessera
