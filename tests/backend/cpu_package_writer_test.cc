// The cpu backend's package tensor file (cpu_package_writer.h) and the tied embedding it stores
// once: the plan (a tied model holds no plain embedding, everything aligned and in order), the
// written file (hash, size, metadata; opens as a packed checkpoint whose panels are the ones
// packing at load produces), token rows read from the packed head (equal to dequantizing the
// head packed from the source; BF16 of a BF16 source equals the source's embedding exactly),
// the executor's embedding source, logits of tied packages against the source (exact in BF16,
// measured in INT8 / INT4), and refusals.
#include "backend/cpu/cpu_package_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_weights.h"
#include "base/sha256.h"
#include "engine/model_executor.h"
#include "engine/placement.h"
#include "logits_test_util.h"
#include "model/checkpoint.h"
#include "model/synthetic_checkpoint.h"
#include "model/tensor_convert.h"
#include "test_support.h"

namespace tessera {
namespace {
namespace fs = std::filesystem;

constexpr WeightFormat kFormats[] = {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kInt8,
                                     WeightFormat::kInt4};

SyntheticModelSpec Spec(bool tied, ModelFamily family = ModelFamily::kQwen2) {
  SyntheticModelSpec s;
  s.family = family;
  s.hidden = 96;  // three INT4 blocks per row
  s.intermediate = 80;
  s.layers = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 24;
  s.vocab = 300;  // not a multiple of 16: a partial panel of head rows
  s.max_position = 300;
  s.tied = tied;
  s.dtype = DType::kBF16;
  return s;
}

// A source checkpoint at `dir`, and beside it `dir`.pkg-<format> holding only config.json and
// the tensor file: enough for OpenCheckpoint.
class CpuPackageWriterTest : public ::testing::Test {
 protected:
  std::shared_ptr<const Checkpoint> Source(const std::string& name, const SyntheticModelSpec& s) {
    const std::string dir = tmp_.File(name);
    EXPECT_TRUE(WriteSyntheticCheckpoint(dir, s).ok());
    auto ckpt = OpenCheckpoint(dir);
    EXPECT_TRUE(ckpt) << ckpt.status().message();
    return ckpt ? *ckpt : nullptr;
  }

  std::string Package(const Checkpoint& source, WeightFormat f, CpuPackageFile* file = nullptr) {
    const std::string dir = source.dir + ".pkg-" + std::string(WeightFormatName(f));
    fs::create_directories(dir);
    fs::copy_file(source.dir + "/config.json", dir + "/config.json",
                  fs::copy_options::overwrite_existing);
    auto written = WriteCpuPackageTensorFile(source, f, dir + "/model.safetensors",
                                             {{"tessera_package", "test"}});
    EXPECT_TRUE(written) << written.status().message();
    if (written && file) *file = *written;
    return dir;
  }

  test::TempDir tmp_;
};

TEST_F(CpuPackageWriterTest, ATiedModelsPlanHoldsTheEmbeddingOnlyAsThePackedHead) {
  auto tied = Source("tied", Spec(true));
  auto untied = Source("untied", Spec(false));
  ASSERT_TRUE(tied && untied);
  for (WeightFormat f : kFormats) {
    SCOPED_TRACE(std::string(WeightFormatName(f)));
    const auto with = PlanCpuPackageTensors(*untied, f);
    const auto without = PlanCpuPackageTensors(*tied, f);
    auto names = [](const std::vector<CpuPackageTensor>& plan) {
      std::set<std::string> n;
      for (const auto& t : plan) n.insert(t.name);
      return n;
    };
    EXPECT_TRUE(names(with).count("model.embed_tokens.weight"));
    EXPECT_FALSE(names(without).count("model.embed_tokens.weight"));
    EXPECT_TRUE(names(without).count(PackedTensorName(-1, "", "data")));
    EXPECT_EQ(with.size(), without.size() + 1);
    for (const auto* plan : {&with, &without}) {
      uint64_t end = 0;
      for (const CpuPackageTensor& t : *plan) {
        EXPECT_EQ(t.offset % kCpuPackageAlignment, 0u) << t.name;
        EXPECT_GE(t.offset, end) << t.name;  // in order, never overlapping
        EXPECT_LT(t.offset - end, kCpuPackageAlignment) << t.name;
        EXPECT_GT(t.bytes, 0u) << t.name;
        end = t.offset + t.bytes;
      }
    }
  }
}

TEST_F(CpuPackageWriterTest, TheFileIsHashedAndOpensWithTheSourcesPanels) {
  for (bool tied : {true, false}) {
    auto source = Source(tied ? "tied" : "untied", Spec(tied));
    ASSERT_TRUE(source);
    for (WeightFormat f : kFormats) {
      const std::string what =
          std::string(tied ? "tied " : "untied ") + std::string(WeightFormatName(f));
      CpuPackageFile file;
      const std::string dir = Package(*source, f, &file);
      EXPECT_EQ(file.bytes, fs::file_size(dir + "/model.safetensors")) << what;
      EXPECT_EQ(file.sha256, *Sha256File(dir + "/model.safetensors")) << what;
      auto package = OpenCheckpoint(dir);
      ASSERT_TRUE(package) << what << ": " << package.status().message();
      const ModelTensors& t = (*package)->tensors;
      ASSERT_TRUE(t.packed.has_value()) << what;
      EXPECT_EQ(t.packed->format, WeightFormatName(f)) << what;
      EXPECT_EQ(t.packed->layout, kCpuPanelLayout) << what;
      EXPECT_EQ((*package)->files.first_shard_metadata().at("tessera_package"), "test") << what;
      EXPECT_EQ(t.lm_head.info, nullptr) << what;
      if (tied) {
        EXPECT_EQ(t.embed.info, nullptr) << what;
      } else {
        ASSERT_NE(t.embed.info, nullptr) << what;
        const TensorInfo* want = source->tensors.embed.info;
        ASSERT_EQ(t.embed->data.size(), want->data.size()) << what;
        EXPECT_EQ(std::memcmp(t.embed->data.data(), want->data.data(), want->data.size()), 0)
            << what;
      }
      auto from_source = LoadCpuHeadMatrix(*source, f);
      auto from_package = LoadCpuHeadMatrix(**package, f);
      ASSERT_TRUE(from_source && from_package) << what;
      EXPECT_TRUE(from_package->data.borrowed()) << what;
      ASSERT_EQ(from_source->bytes(), from_package->bytes()) << what;
      EXPECT_EQ(std::memcmp(from_source->data.data(), from_package->data.data(),
                            from_source->data.size()),
                0)
          << what;
    }
  }
}

// Row `id` of the source's embedding, widened.
std::vector<float> EmbeddingRow(const Checkpoint& source, int32_t id) {
  std::vector<float> row(static_cast<size_t>(source.tensors.spec.hidden));
  EXPECT_TRUE(WidenRowsToF32(source.tensors.embed, id, 1, row).ok());
  return row;
}

TEST_F(CpuPackageWriterTest, TheCpuBackendReadsTokenRowsFromTheTiedHead) {
  auto source = Source("tied", Spec(true));
  ASSERT_TRUE(source);
  const int64_t hidden = source->tensors.spec.hidden;
  const std::vector<int32_t> ids = {0, 1, 17, 255, 256, 299, 17};
  for (WeightFormat f : kFormats) {
    const std::string what(WeightFormatName(f));
    auto package = OpenCheckpoint(Package(*source, f));
    ASSERT_TRUE(package) << package.status().message();
    auto cpu = MakeCpuBackend({.weights = f, .threads = 2});
    ASSERT_TRUE(cpu->LoadLayers(**package, {0, 2}, {.max_slots = 1, .max_seq = 8}).ok());
    EXPECT_FALSE(cpu->CanEmbedFromHead()) << what;  // no head yet
    std::vector<float> rows(ids.size() * static_cast<size_t>(hidden));
    EXPECT_FALSE(cpu->EmbedFromHead(ids, rows).ok()) << what;
    ASSERT_TRUE(cpu->LoadHead(**package).ok());
    ASSERT_TRUE(cpu->CanEmbedFromHead()) << what;
    ASSERT_TRUE(cpu->EmbedFromHead(ids, rows).ok()) << what;
    auto head = LoadCpuHeadMatrix(*source, f);  // packed from the source, at load
    ASSERT_TRUE(head);
    for (size_t i = 0; i < ids.size(); ++i) {
      std::vector<float> want(static_cast<size_t>(hidden));
      ASSERT_TRUE(DequantizeRowReference(*head, ids[i], want).ok());
      const std::span<const float> got(rows.data() + i * static_cast<size_t>(hidden), want.size());
      EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin())) << what << " id " << ids[i];
      if (f == WeightFormat::kF32 || f == WeightFormat::kBF16) {
        // A BF16 source's values survive F32 and BF16 packing exactly.
        EXPECT_TRUE(std::ranges::equal(got, EmbeddingRow(*source, ids[i]))) << what;
      }
    }
    for (int32_t bad : {-1, 300}) {
      const int32_t one[] = {bad};
      Status st = cpu->EmbedFromHead(one, std::span(rows.data(), static_cast<size_t>(hidden)));
      EXPECT_EQ(st.code(), ErrorCode::kOutOfRange) << what << " " << bad;
    }
  }
}

using test::AllLogits;
using test::Load;
using test::MaxAbsDiff;
using test::RandomTokens;
using test::Top1Agreement;

// The executor takes token rows from the head's backend exactly when the package has no
// embedding, says so, and only the embedding differs from the same format loaded from the
// source: BF16 of a BF16 source is bit-identical (the rows are the same values), INT8 / INT4
// change each looked-up row by at most one quantization step.
TEST_F(CpuPackageWriterTest, ExecutorEmbedsFromTheHeadOfATiedPackage) {
  auto source = Source("tied", Spec(true));
  ASSERT_TRUE(source);
  const std::vector<int32_t> tokens = RandomTokens(256, 300, 7);
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kInt8, WeightFormat::kInt4}) {
    const std::string what(WeightFormatName(f));
    auto package = OpenCheckpoint(Package(*source, f));
    ASSERT_TRUE(package) << package.status().message();
    auto from_source = Load(source, "cpu", f, 300, 64);
    auto from_package = Load(*package, "cpu", f, 300, 64);
    auto split = Load(*package, "cpu:1,cpu", f, 300, 64);
    ASSERT_TRUE(from_source && from_package && split);
    EXPECT_EQ(from_source->embedding_source(), "model.embed_tokens.weight (BF16, host)");
    EXPECT_TRUE(from_package->embedding_source().starts_with("rows of the tied LM head on cpu-"))
        << from_package->embedding_source();
    EXPECT_TRUE(from_package->embedding_source().ends_with("-" + what + "#0"))
        << from_package->embedding_source();
    EXPECT_NE(split->embedding_source().find("#1"), std::string::npos) << split->embedding_source();
    const auto want = AllLogits(*from_source, tokens);
    const auto got = AllLogits(*from_package, tokens);
    EXPECT_EQ(AllLogits(*split, tokens), got) << what;  // the same rows, the same kernels
    const double top1 = Top1Agreement(want, got, 300), max_abs = MaxAbsDiff(want, got);
    std::printf(
        "[ measured ] tied %s package vs source (bf16 lookup): top-1 %.4f, max |dlogit| "
        "%.4g, 256 positions\n",
        what.c_str(), top1, max_abs);
    if (f == WeightFormat::kBF16) {
      EXPECT_EQ(got, want);
    } else {
      EXPECT_GT(max_abs, 0.0) << what;  // the rows did change
      EXPECT_GE(top1, f == WeightFormat::kInt8 ? 0.98 : 0.9) << what;
    }
    // A token outside the vocabulary is refused before any row is read.
    std::vector<float> last(300);
    const int32_t bad[] = {5, 300};
    Status st = from_package->Forward(0, 0, bad, last);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.message();
  }
}

TEST_F(CpuPackageWriterTest, AnUntiedPackageKeepsItsEmbeddingOnTheHost) {
  auto source = Source("untied", Spec(false));
  ASSERT_TRUE(source);
  const std::vector<int32_t> tokens = RandomTokens(64, 300, 9);
  for (WeightFormat f : {WeightFormat::kInt8, WeightFormat::kInt4}) {
    auto package = OpenCheckpoint(Package(*source, f));
    ASSERT_TRUE(package) << package.status().message();
    auto from_source = Load(source, "cpu", f, 300, 64);
    auto from_package = Load(*package, "cpu", f, 300, 64);
    ASSERT_TRUE(from_source && from_package);
    EXPECT_EQ(from_package->embedding_source(), "model.embed_tokens.weight (BF16, host)");
    EXPECT_EQ(AllLogits(*from_package, tokens), AllLogits(*from_source, tokens))
        << WeightFormatName(f);
  }
}

// A package written before the embedding was stored once (a tied model's plain embedding beside
// its packed head) is refused with the way out, not run.
TEST_F(CpuPackageWriterTest, AnOldTiedPackageWithItsEmbeddingIsRefused) {
  auto source = Source("untied", Spec(false));
  ASSERT_TRUE(source);
  const std::string dir = Package(*source, WeightFormat::kInt8);
  std::string config = test::ReadFile(dir + "/config.json");
  const size_t at = config.find("\"tie_word_embeddings\": false");
  ASSERT_NE(at, std::string::npos) << config;
  config.replace(at, std::string("\"tie_word_embeddings\": false").size(),
                 "\"tie_word_embeddings\": true");
  test::WriteFile(dir + "/config.json", config);
  auto opened = OpenCheckpoint(dir);
  ASSERT_FALSE(opened);
  EXPECT_NE(opened.status().message().find("re-convert it with tessera convert"), std::string::npos)
      << opened.status().message();
}

TEST_F(CpuPackageWriterTest, BadDestinationsAndSourcesAreErrors) {
  auto source = Source("tied", Spec(true));
  ASSERT_TRUE(source);
  auto missing =
      WriteCpuPackageTensorFile(*source, WeightFormat::kInt8, tmp_.File("no/such/dir/x"), {});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), ErrorCode::kIo);
  EXPECT_NE(missing.status().message().find("cannot create"), std::string::npos);
  auto package = OpenCheckpoint(Package(*source, WeightFormat::kInt8));
  ASSERT_TRUE(package);
  auto again = WriteCpuPackageTensorFile(**package, WeightFormat::kInt8, tmp_.File("y"), {});
  ASSERT_FALSE(again);
  EXPECT_NE(again.status().message().find("already a package"), std::string::npos);
  if (fs::exists("/dev/full")) {  // a full disk: the write fails, the error says so
    auto full = WriteCpuPackageTensorFile(*source, WeightFormat::kBF16, "/dev/full", {});
    ASSERT_FALSE(full);
    EXPECT_EQ(full.status().code(), ErrorCode::kIo) << full.status().message();
  }
}

}  // namespace
}  // namespace tessera
