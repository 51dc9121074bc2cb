// Models people already have, read in place: Ollama's store laid out exactly as Ollama writes
// it (manifests/<host>/<ns>/<model>/<tag> holding a schemaVersion 2 manifest, blobs named
// sha256-<hex> of their bytes), LM Studio's folder (~/.lmstudio/models/<publisher>/<repo>),
// plain folders of GGUF files; names, ambiguity, listing, refusals of damaged or unsupported
// models, and nothing ever written into those stores. The CLI tests run the real binary.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "catalog/gguf_model.h"
#include "catalog/model_store.h"
#include "catalog/ollama_manifest.h"
#include "catalog/ollama_store.h"
#include "model/synthetic_checkpoint.h"
#include "test_support.h"

namespace tessera {
namespace {
namespace fs = std::filesystem;

constexpr char kModelMedia[] = "application/vnd.ollama.image.model";
constexpr char kTemplate[] =
    "{{- if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}<|im_start|>user\n"
    "{{ .Prompt }}<|im_end|>\n<|im_start|>assistant\n";
constexpr char kSystem[] = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
constexpr char kParams[] = R"({"num_ctx":4096,"stop":["<|im_start|>","<|im_end|>"],)"
                           R"("temperature":0.7,"top_k":20,"mirostat":2})";

// A real GGUF v3 header: no tensors, one string key (general.architecture), then `filler`
// bytes of padding, so that files of different content and size can be made.
std::string GgufBytes(const std::string& architecture, size_t filler) {
  std::string out = "GGUF";
  auto u32 = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [&](uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); };
  auto str = [&](const std::string& s) {
    u64(s.size());
    out += s;
  };
  u32(3);  // version
  u64(0);  // tensors
  u64(1);  // key-value pairs
  str("general.architecture");
  u32(8);  // GGUF_TYPE_STRING
  str(architecture);
  out.append(filler, '\0');
  return out;
}

// Ollama's store, built as Ollama writes it.
class OllamaStoreBuilder {
 public:
  explicit OllamaStoreBuilder(std::string root) : root_(std::move(root)) {}

  // Writes blobs/sha256-<hex> and returns the layer descriptor.
  nlohmann::json Blob(const std::string& media_type, const std::string& bytes) {
    const std::string hex = Sha256Hex(bytes);
    fs::create_directories(root_ + "/blobs");
    test::WriteFile(root_ + "/blobs/sha256-" + hex, bytes);
    return {{"mediaType", media_type}, {"digest", "sha256:" + hex}, {"size", bytes.size()}};
  }

  std::string BlobPath(const nlohmann::json& layer) const {
    std::string digest = layer["digest"];
    return root_ + "/blobs/sha256-" + digest.substr(7);
  }

  // manifests/<relative> holding the manifest (Go's json.Encoder output: one line + "\n").
  std::string Manifest(const std::string& relative, const nlohmann::json& config,
                       const std::vector<nlohmann::json>& layers) {
    nlohmann::json m = {{"schemaVersion", 2},
                        {"mediaType", "application/vnd.docker.distribution.manifest.v2+json"},
                        {"config", config},
                        {"layers", layers}};
    const std::string path = root_ + "/manifests/" + relative;
    fs::create_directories(fs::path(path).parent_path());
    test::WriteFile(path, m.dump() + "\n");
    return path;
  }

  nlohmann::json Config(const std::string& file_type) {
    nlohmann::json c = {
        {"model_format", "gguf"},  {"model_family", "qwen2"},       {"model_families", {"qwen2"}},
        {"model_type", "494.03M"}, {"file_type", file_type},        {"architecture", "amd64"},
        {"os", "linux"},           {"rootfs", {{"type", "layers"}}}};
    return Blob("application/vnd.docker.container.image.v1+json", c.dump() + "\n");
  }

  // A model as `ollama pull` leaves it: model, template, system, params and license layers.
  std::vector<nlohmann::json> PulledLayers(const std::string& gguf) {
    return {Blob(kModelMedia, gguf), Blob("application/vnd.ollama.image.template", kTemplate),
            Blob("application/vnd.ollama.image.system", kSystem),
            Blob("application/vnd.ollama.image.params", kParams),
            Blob("application/vnd.ollama.image.license", "Apache License 2.0 ...")};
  }

  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

// Every file below `dir` with its size and modification time: what "nothing written" compares.
std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> Snapshot(const std::string& dir) {
  std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    files[e.path().string()] = {e.is_regular_file() ? e.file_size() : 0, e.last_write_time()};
  }
  return files;
}

class GgufStoresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ = tmp_.File("home");
    ollama_ = tmp_.File("ollama");
    lmstudio_ = home_ + "/.lmstudio/models";
    setenv("HOME", home_.c_str(), 1);
    setenv("OLLAMA_MODELS", ollama_.c_str(), 1);
    setenv("TESSERA_MODELS", tmp_.File("models").c_str(), 1);
    setenv("HF_HOME", tmp_.File("hf").c_str(), 1);
    unsetenv("HF_HUB_CACHE");
    auto catalog = BuiltinCatalog();
    ASSERT_TRUE(catalog);
    catalog_ = *catalog;
  }

  // qwen2.5:0.5b and hf.co/user/repo:Q4_K_M, as pulled.
  void PullTwoModels() {
    gguf_ = GgufBytes("qwen2", 3000);
    store_.Manifest("registry.ollama.ai/library/qwen2.5/0.5b", store_.Config("Q4_K_M"),
                    store_.PulledLayers(gguf_));
    store_.Manifest("hf.co/user/repo/Q4_K_M", store_.Config("Q4_K_M"),
                    {store_.Blob(kModelMedia, GgufBytes("llama", 100))});
  }

  void WriteLmStudioFile(const std::string& relative, const std::string& bytes) {
    fs::create_directories(fs::path(lmstudio_ + "/" + relative).parent_path());
    test::WriteFile(lmstudio_ + "/" + relative, bytes);
  }

  test::ProcessResult Tessera(std::vector<std::string> args) {
    std::vector<std::string> argv = {"env",
                                     "HOME=" + home_,
                                     "OLLAMA_MODELS=" + ollama_,
                                     "TESSERA_MODELS=" + tmp_.File("models"),
                                     "HF_HOME=" + tmp_.File("hf"),
                                     test::TesseraBinary()};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::RunProcess(argv, "", 60000);
  }

  test::TempDir tmp_;
  std::string home_, ollama_, lmstudio_;
  OllamaStoreBuilder store_{tmp_.File("ollama")};
  std::string gguf_;
  const Catalog* catalog_ = nullptr;
};

TEST(OllamaNames, ParseAsOllamaDoes) {
  struct Case {
    const char* text;
    const char* path;  // "" when not a name
    const char* shortest;
  };
  const Case cases[] = {
      {"qwen2.5:0.5b", "registry.ollama.ai/library/qwen2.5/0.5b", "qwen2.5:0.5b"},
      {"qwen2.5", "registry.ollama.ai/library/qwen2.5/latest", "qwen2.5:latest"},
      {"library/qwen2.5:0.5b", "registry.ollama.ai/library/qwen2.5/0.5b", "qwen2.5:0.5b"},
      {"registry.ollama.ai/library/qwen2.5:0.5b", "registry.ollama.ai/library/qwen2.5/0.5b",
       "qwen2.5:0.5b"},
      {"user/model", "registry.ollama.ai/user/model/latest", "user/model:latest"},
      {"hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M",
       "hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF/Q4_K_M",
       "hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M"},
      {"https://hf.co/u/r:q8_0", "hf.co/u/r/q8_0", "hf.co/u/r:q8_0"},
      {"localhost:5000/ns/m:t", "localhost:5000/ns/m/t", "localhost:5000/ns/m:t"},
      {"_x:_y", "registry.ollama.ai/library/_x/_y", "_x:_y"},
      {"", "", ""},
      {":", "", ""},
      {"a:", "", ""},
      {":t", "", ""},
      {"/a", "", ""},
      {"a/", "", ""},
      {"a//b", "", ""},
      {"../x", "", ""},
      {"./x", "", ""},
      {"a/.b/c", "", ""},
      {"a/b.c/d", "", ""},  // no '.' in a namespace
      {"a b", "", ""},
      {"-x", "", ""},
      {"m@sha256:0123", "", ""},
      {"a/b/c/d", "", ""},  // "a/b" is no host
      {"m:t/x", "", ""},
      {"https:///ns/m", "", ""},
  };
  for (const Case& c : cases) {
    std::optional<OllamaName> n = ParseOllamaName(c.text);
    if (*c.path == '\0') {
      EXPECT_FALSE(n) << c.text << " -> " << n->RelativePath();
      continue;
    }
    ASSERT_TRUE(n) << c.text;
    EXPECT_EQ(n->RelativePath(), c.path) << c.text;
    EXPECT_EQ(n->Shortest(), c.shortest) << c.text;
    // The path of a manifest gives the name back.
    std::optional<OllamaName> back = OllamaNameFromPath(c.path);
    ASSERT_TRUE(back) << c.path;
    EXPECT_EQ(back->Shortest(), c.shortest);
  }
  EXPECT_FALSE(ParseOllamaName(std::string(81, 'm')));  // parts are at most 80 characters
  EXPECT_TRUE(ParseOllamaName(std::string(80, 'm')));
  EXPECT_FALSE(OllamaNameFromPath("a/b/c"));
  EXPECT_FALSE(OllamaNameFromPath("h/n/m/t/x"));
  EXPECT_FALSE(OllamaNameFromPath("h/../m/t"));
}

TEST(OllamaManifests, MalformedOnesGiveOneLineErrors) {
  const std::string digest = "sha256:" + std::string(64, 'a');
  auto layer = [&](const std::string& extra) {
    return R"({"mediaType":"application/vnd.ollama.image.model","digest":")" + digest +
           R"(","size":10)" + extra + "}";
  };
  const std::string config = R"({"mediaType":"x","digest":")" + digest + R"(","size":5})";
  auto manifest = [&](const std::string& layers) {
    return R"({"schemaVersion":2,"config":)" + config + R"(,"layers":[)" + layers + "]}";
  };
  auto good = ParseOllamaManifest(manifest(layer("")), "m");
  ASSERT_TRUE(good) << good.status().message();
  EXPECT_EQ(good->layers.size(), 1u);
  EXPECT_EQ(good->layers[0].kind, OllamaLayerKind::kModel);
  EXPECT_EQ(good->TotalSize(), 15u);
  // An empty config digest is no config, as Ollama reads it.
  auto no_config = ParseOllamaManifest(
      R"({"schemaVersion":2,"config":{"digest":""},"layers":[)" + layer("") + "]}", "m");
  ASSERT_TRUE(no_config) << no_config.status().message();
  EXPECT_FALSE(no_config->config);

  const std::string bad[] = {
      "",
      "not json",
      "[]",
      R"({"schemaVersion":1,"config":)" + config + R"(,"layers":[]})",
      R"({"schemaVersion":"2","config":)" + config + R"(,"layers":[]})",
      R"({"schemaVersion":2,"layers":[]})",
      R"({"schemaVersion":2,"config":[],"layers":[]})",
      R"({"schemaVersion":2,"config":)" + config + "}",
      R"({"schemaVersion":2,"config":)" + config + R"(,"layers":{}})",
      R"({"schemaVersion":2,"mediaType":5,"config":)" + config + R"(,"layers":[]})",
      manifest("5"),
      manifest(R"({"digest":")" + digest + R"(","size":1})"),
      manifest(R"({"mediaType":"m","size":1})"),
      manifest(R"({"mediaType":"m","digest":"sha256:abc","size":1})"),
      manifest(R"({"mediaType":"m","digest":"sha256:)" + std::string(64, 'A') + R"(","size":1})"),
      manifest(R"({"mediaType":"m","digest":"sha512:)" + std::string(64, 'a') + R"(","size":1})"),
      manifest(R"({"mediaType":"m","digest":")" + digest + R"(","size":-1})"),
      manifest(R"({"mediaType":"m","digest":")" + digest + R"(","size":1.5})"),
      manifest(R"({"mediaType":"m","digest":")" + digest + R"(","size":"1"})"),
      manifest(R"({"mediaType":"m","digest":")" + digest + R"("})"),
      R"({"schemaVersion":2,"schemaVersion":2,"config":)" + config + R"(,"layers":[]})",
      std::string(100000, '[') + std::string(100000, ']'),
      "{\"schemaVersion\":2,\"config\":" + config + ",\"layers\":[" + layer("") + "]}\xff",
  };
  for (const std::string& text : bad) {
    auto parsed = ParseOllamaManifest(text, "manifests/x");
    ASSERT_FALSE(parsed) << text.substr(0, 200);
    EXPECT_EQ(parsed.status().code(), ErrorCode::kCorrupt) << text.substr(0, 200);
    EXPECT_EQ(parsed.status().message().find('\n'), std::string::npos) << parsed.status().message();
    EXPECT_NE(parsed.status().message().find("manifests/x"), std::string::npos)
        << parsed.status().message();
  }
  std::string many;
  for (int i = 0; i < 5000; ++i) many += (i ? "," : "") + layer("");
  EXPECT_FALSE(ParseOllamaManifest(manifest(many), "m"));
}

TEST(OllamaParams, TypedAsOllamaReadsThem) {
  auto p = ParseOllamaParams(kParams, "params");
  ASSERT_TRUE(p) << p.status().message();
  EXPECT_EQ(p->num_ctx, 4096);
  EXPECT_EQ(p->top_k, 20);
  EXPECT_DOUBLE_EQ(*p->temperature, 0.7);
  EXPECT_EQ(p->stop, (std::vector<std::string>{"<|im_start|>", "<|im_end|>"}));
  EXPECT_FALSE(p->top_p);
  EXPECT_EQ(p->ignored, std::vector<std::string>{"mirostat"});  // Ollama ignores it too
  EXPECT_EQ(OllamaParamsToJson(*p)["num_ctx"], 4096);
  EXPECT_TRUE(ParseOllamaParams(R"({"temperature":null,"use_mmap":true})", "p"));
  for (const char* bad :
       {R"({"temperature":"hot"})", R"({"num_ctx":4096.5})", R"({"stop":"</s>"})",
        R"({"stop":[1]})", R"({"use_mmap":1})", R"({"top_k":1e300})", "[]", "{"}) {
    auto parsed = ParseOllamaParams(bad, "the params layer");
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.status().message().find('\n'), std::string::npos);
    EXPECT_NE(parsed.status().message().find("the params layer"), std::string::npos);
  }
}

TEST(GgufFileNames, QuantizationFromTheName) {
  const std::pair<const char*, const char*> cases[] = {
      {"qwen2.5-0.5b-instruct-q4_k_m.gguf", "Q4_K_M"},
      {"Llama-3.2-1B-Instruct-Q8_0.gguf", "Q8_0"},
      {"model-IQ4_NL.gguf", "IQ4_NL"},
      {"model.Q4_K.gguf", "Q4_K"},
      {"SmolLM2-135M-Instruct-f16.gguf", "F16"},
      {"gemma-3-1b-it-BF16.gguf", "BF16"},
      {"Qwen3-0.6B-Q6_K.gguf", "Q6_K"},
      {"phi-IQ2_XXS.gguf", "IQ2_XXS"},
      {"model.gguf", ""},
      {"modelq4_k_m.gguf", ""},    // not between separators
      {"model-Q4_K_MX.gguf", ""},  // nor here
      {"f16-then-Q8_0.gguf", "Q8_0"},
      {"model_q8_0.gguf", "Q8_0"},
  };
  for (const auto& [name, quantization] : cases) {
    EXPECT_EQ(QuantizationFromFileName(name), quantization) << name;
  }
}

TEST_F(GgufStoresTest, OllamaNamesResolveToTheModelBlobAndItsLayers) {
  PullTwoModels();
  for (const char* name :
       {"qwen2.5:0.5b", "library/qwen2.5:0.5b", "registry.ollama.ai/library/qwen2.5:0.5b"}) {
    auto r = ResolveModel(name, *catalog_);
    ASSERT_TRUE(r) << name << ": " << r.status().message();
    ASSERT_TRUE(r->gguf);
    const GgufModel& g = *r->gguf;
    EXPECT_EQ(r->location, ModelLocation::kOllama);
    EXPECT_EQ(g.name, "qwen2.5:0.5b");
    EXPECT_EQ(g.path, ollama_ + "/blobs/sha256-" + Sha256Hex(gguf_));  // in place
    EXPECT_EQ(r->Where(), g.path);
    EXPECT_TRUE(r->dir.empty());
    EXPECT_EQ(g.expected_sha256, Sha256Hex(gguf_));
    EXPECT_EQ(g.size_bytes, gguf_.size());
    EXPECT_EQ(g.quantization, "Q4_K_M");
    EXPECT_EQ(g.family, "qwen2");
    EXPECT_EQ(g.parameter_size, "494.03M");
    EXPECT_EQ(g.go_template, std::string(kTemplate));
    EXPECT_EQ(g.system_prompt, std::string(kSystem));
    ASSERT_TRUE(g.params);
    EXPECT_EQ(g.params->num_ctx, 4096);
    ASSERT_EQ(g.licenses.size(), 1u);
    EXPECT_EQ(g.manifest_path, ollama_ + "/manifests/registry.ollama.ai/library/qwen2.5/0.5b");
    std::vector<ProgressEvent> events;
    ProgressCallback progress = [&](const ProgressEvent& e) { events.push_back(e); };
    EXPECT_TRUE(VerifyGgufModel(g, progress).ok());
    ASSERT_FALSE(events.empty());
    EXPECT_TRUE(events.back().finished);
    EXPECT_EQ(events.back().done, gguf_.size());
  }
  // Ollama matches names regardless of case; two manifests differing only in case are refused.
  auto upper = ResolveModel("Qwen2.5:0.5B", *catalog_);
  ASSERT_TRUE(upper) << upper.status().message();
  EXPECT_EQ(upper->gguf->name, "qwen2.5:0.5b");
  auto hf = ResolveModel("hf.co/user/repo:Q4_K_M", *catalog_);
  ASSERT_TRUE(hf) << hf.status().message();
  EXPECT_EQ(hf->gguf->name, "hf.co/user/repo:Q4_K_M");
  EXPECT_FALSE(hf->gguf->go_template);  // no template layer: the GGUF's own template applies
  EXPECT_FALSE(hf->gguf->params);

  // Not pulled: the tag must match; the message says where it looked.
  store_.Manifest("registry.ollama.ai/library/Qwen2.5/0.5b", store_.Config("Q4_K_M"),
                  {store_.Blob(kModelMedia, gguf_)});
  auto two_cases = ResolveModel("QWEN2.5:0.5b", *catalog_);
  ASSERT_FALSE(two_cases);
  EXPECT_NE(two_cases.status().message().find("differ only in case"), std::string::npos)
      << two_cases.status().message();
  EXPECT_EQ(ResolveModel("Qwen2.5:0.5b", *catalog_)->gguf->name, "Qwen2.5:0.5b");  // exact

  auto missing = ResolveModel("qwen2.5", *catalog_);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(missing.status().message().find(ollama_), std::string::npos)
      << missing.status().message();
  EXPECT_NE(missing.status().message().find(lmstudio_), std::string::npos);
  auto missing_tag = ResolveModel("qwen2.5:7b", *catalog_);
  ASSERT_FALSE(missing_tag);
  EXPECT_EQ(missing_tag.status().message().find("run `tessera pull"), std::string::npos)
      << "tessera cannot pull an Ollama name: " << missing_tag.status().message();
  EXPECT_NE(missing_tag.status().message().find("ollama pull qwen2.5:7b"), std::string::npos);
}

TEST_F(GgufStoresTest, DamagedBlobsAreRefused) {
  PullTwoModels();
  auto r = ResolveModel("qwen2.5:0.5b", *catalog_);
  ASSERT_TRUE(r);
  const std::string blob = r->gguf->path;
  // Same size, one byte changed: found when the model is opened (hashed then, not before).
  std::string damaged = gguf_;
  damaged[damaged.size() - 1] = 'x';
  test::WriteFile(blob, damaged);
  auto again = ResolveModel("qwen2.5:0.5b", *catalog_);
  ASSERT_TRUE(again) << again.status().message();
  Status st = VerifyGgufModel(*again->gguf);
  EXPECT_EQ(st.code(), ErrorCode::kCorrupt);
  EXPECT_NE(st.message().find("does not match its sha256"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("ollama pull qwen2.5:0.5b"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find('\n'), std::string::npos);
  // Listing with --verify says so too.
  auto listed = ListInstalledModels(*catalog_, /*rehash=*/true);
  ASSERT_TRUE(listed);
  bool seen = false;
  for (const InstalledModel& m : *listed) {
    if (m.name != "qwen2.5:0.5b") continue;
    seen = true;
    EXPECT_TRUE(m.verification.starts_with("changed: ")) << m.verification;
  }
  EXPECT_TRUE(seen);
  // Truncated: refused at once (a size is checked without reading).
  test::WriteFile(blob, gguf_.substr(0, 100));
  auto truncated = ResolveModel("qwen2.5:0.5b", *catalog_);
  ASSERT_FALSE(truncated);
  EXPECT_EQ(truncated.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(truncated.status().message().find("100 bytes"), std::string::npos);
  // Gone.
  fs::remove(blob);
  auto gone = ResolveModel("qwen2.5:0.5b", *catalog_);
  ASSERT_FALSE(gone);
  EXPECT_NE(gone.status().message().find("missing"), std::string::npos);
  // A small layer (the template) changed: its digest is checked whenever it is read.
  test::WriteFile(blob, gguf_);
  ASSERT_TRUE(ResolveModel("qwen2.5:0.5b", *catalog_));
  const std::string template_blob = ollama_ + "/blobs/sha256-" + Sha256Hex(kTemplate);
  test::WriteFile(template_blob, std::string(kTemplate).replace(0, 1, "X"));
  auto bad_template = ResolveModel("qwen2.5:0.5b", *catalog_);
  ASSERT_FALSE(bad_template);
  EXPECT_NE(bad_template.status().message().find("does not match its digest"), std::string::npos)
      << bad_template.status().message();
}

TEST_F(GgufStoresTest, UnsupportedAndMalformedManifestsAreRefusedNamingWhy) {
  const std::string gguf = GgufBytes("llama", 10);
  auto model = store_.Blob(kModelMedia, gguf);
  const std::pair<std::vector<nlohmann::json>, const char*> refused[] = {
      {{model, store_.Blob("application/vnd.ollama.image.adapter", "lora")}, "LoRA adapter"},
      {{model, store_.Blob("application/vnd.ollama.image.projector", "proj")}, "vision projector"},
      {{model, store_.Blob("application/vnd.ollama.image.messages", "[]")}, "preset messages"},
      {{model, model}, "more than one model layer"},
      {{store_.Blob("application/vnd.ollama.image.system", "s")}, "no model layer"},
      {{model, store_.Blob("application/vnd.ollama.image.tensor", "t")},
       "application/vnd.ollama.image.tensor"},
      {{model, store_.Blob("application/vnd.ollama.image.system", "a"),
        store_.Blob("application/vnd.ollama.image.system", "b")},
       "a second"},
  };
  int i = 0;
  for (const auto& [layers, why] : refused) {
    const std::string tag = "t" + std::to_string(i++);
    store_.Manifest("registry.ollama.ai/library/m/" + tag, store_.Config("Q8_0"), layers);
    auto r = ResolveModel("m:" + tag, *catalog_);
    ASSERT_FALSE(r) << why;
    EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported) << r.status().message();
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("m:" + tag), std::string::npos);
  }
  // The deprecated embed layer is ignored, as Ollama does.
  store_.Manifest("registry.ollama.ai/library/m/embed", store_.Config("Q8_0"),
                  {model, store_.Blob("application/vnd.ollama.image.embed", "e")});
  EXPECT_TRUE(ResolveModel("m:embed", *catalog_));
  // Weights Ollama keeps in another format.
  nlohmann::json safetensors_config = store_.Blob("application/vnd.docker.container.image.v1+json",
                                                  R"({"model_format":"safetensors"})");
  store_.Manifest("registry.ollama.ai/library/m/st", safetensors_config, {model});
  auto st = ResolveModel("m:st", *catalog_);
  ASSERT_FALSE(st);
  EXPECT_NE(st.status().message().find("safetensors"), std::string::npos);
  // A damaged manifest: one line naming the file.
  const std::string path = ollama_ + "/manifests/registry.ollama.ai/library/m/broken";
  test::WriteFile(path, R"({"schemaVersion":2,"config":{},"layers":[{"mediaType":5}]})");
  auto broken = ResolveModel("m:broken", *catalog_);
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(broken.status().message().find(path), std::string::npos);
  EXPECT_EQ(broken.status().message().find('\n'), std::string::npos);

  // Listed all the same, each saying why it cannot run.
  auto listed = ListInstalledModels(*catalog_, false);
  ASSERT_TRUE(listed) << listed.status().message();
  std::map<std::string, std::string> verification;
  for (const InstalledModel& m : *listed) verification[m.name] = m.verification;
  EXPECT_TRUE(verification["m:t0"].starts_with("refused: ")) << verification["m:t0"];
  EXPECT_TRUE(verification["m:broken"].starts_with("changed: ")) << verification["m:broken"];
  EXPECT_EQ(verification["m:embed"], "verified");
}

TEST_F(GgufStoresTest, LmStudioFolderAndAmbiguousNames) {
  WriteLmStudioFile("lmstudio-community/Qwen2.5-0.5B-Instruct-GGUF/Qwen2.5-0.5B-Instruct-Q8_0.gguf",
                    GgufBytes("qwen2", 50));
  auto one = ResolveModel("lmstudio-community/Qwen2.5-0.5B-Instruct-GGUF", *catalog_);
  ASSERT_TRUE(one) << one.status().message();
  EXPECT_EQ(one->location, ModelLocation::kLmStudio);
  EXPECT_EQ(one->gguf->path, lmstudio_ +
                                 "/lmstudio-community/Qwen2.5-0.5B-Instruct-GGUF/"
                                 "Qwen2.5-0.5B-Instruct-Q8_0.gguf");
  EXPECT_EQ(one->gguf->quantization, "Q8_0");
  EXPECT_TRUE(one->gguf->expected_sha256.empty());
  EXPECT_TRUE(VerifyGgufModel(*one->gguf).ok());  // nothing to check the bytes against

  // Two quantizations of one repository: the short name is ambiguous, each file is not.
  WriteLmStudioFile(
      "lmstudio-community/Qwen2.5-0.5B-Instruct-GGUF/Qwen2.5-0.5B-Instruct-Q4_K_M.gguf",
      GgufBytes("qwen2", 40));
  auto two = ResolveModel("lmstudio-community/Qwen2.5-0.5B-Instruct-GGUF", *catalog_);
  ASSERT_FALSE(two);
  EXPECT_EQ(two.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(two.status().message().find("Q8_0.gguf"), std::string::npos);
  EXPECT_NE(two.status().message().find("Q4_K_M.gguf"), std::string::npos);
  auto file = ResolveModel(
      "lmstudio-community/Qwen2.5-0.5B-Instruct-GGUF/Qwen2.5-0.5B-Instruct-Q4_K_M.gguf", *catalog_);
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->gguf->quantization, "Q4_K_M");

  // One name, two stores: refused, naming both and how to name each alone.
  store_.Manifest("registry.ollama.ai/acme/tiny/latest", store_.Config("F16"),
                  {store_.Blob(kModelMedia, GgufBytes("llama", 1))});
  WriteLmStudioFile("acme/tiny/tiny-F16.gguf", GgufBytes("llama", 2));
  auto both = ResolveModel("acme/tiny", *catalog_);
  ASSERT_FALSE(both);
  EXPECT_EQ(both.status().code(), ErrorCode::kInvalidArgument);
  const std::string why = both.status().message();
  EXPECT_NE(why.find("Ollama's store"), std::string::npos) << why;
  EXPECT_NE(why.find("LM Studio's folder"), std::string::npos) << why;
  EXPECT_NE(why.find("acme/tiny:latest"), std::string::npos) << why;
  EXPECT_NE(why.find(lmstudio_ + "/acme/tiny/tiny-F16.gguf"), std::string::npos) << why;
  EXPECT_EQ(ResolveModel("acme/tiny:latest", *catalog_)->location, ModelLocation::kOllama);
  EXPECT_EQ(ResolveModel(lmstudio_ + "/acme/tiny/tiny-F16.gguf", *catalog_)->location,
            ModelLocation::kPath);

  // tessera's store against another store: refused the same way.
  SyntheticModelSpec spec;
  spec.vocab = 512;
  fs::create_directories(tmp_.File("models/acme--tiny2"));
  ASSERT_TRUE(WriteSyntheticModel(tmp_.File("models/acme--tiny2"), spec).ok());
  EXPECT_EQ(ResolveModel("acme/tiny2", *catalog_)->location, ModelLocation::kStore);
  WriteLmStudioFile("acme/tiny2/tiny2.gguf", GgufBytes("llama", 3));
  auto store_and_lm = ResolveModel("acme/tiny2", *catalog_);
  ASSERT_FALSE(store_and_lm);
  EXPECT_NE(store_and_lm.status().message().find("tessera's store"), std::string::npos);

  // Every listed name resolves back to its own row; ambiguous ones are listed by path.
  auto listed = ListInstalledModels(*catalog_, false);
  ASSERT_TRUE(listed) << listed.status().message();
  std::map<std::string, ModelLocation> where;
  for (const InstalledModel& m : *listed) {
    where[m.name] = m.location;
    auto r = ResolveModel(m.name, *catalog_);
    ASSERT_TRUE(r) << m.name << ": " << r.status().message();
    EXPECT_EQ(fs::path(r->Where()).lexically_normal(), fs::path(m.Where()).lexically_normal())
        << m.name;
  }
  EXPECT_EQ(where["acme/tiny:latest"], ModelLocation::kOllama);
  EXPECT_EQ(where["lmstudio-community/Qwen2.5-0.5B-Instruct-GGUF/Qwen2.5-0.5B-Instruct-Q8_0.gguf"],
            ModelLocation::kLmStudio);
  EXPECT_EQ(where["acme/tiny/tiny-F16.gguf"], ModelLocation::kLmStudio);
  EXPECT_EQ(where[tmp_.File("models/acme--tiny2")], ModelLocation::kStore);  // by path
}

TEST_F(GgufStoresTest, GgufFilesAndFoldersByPath) {
  const std::string dir = tmp_.File("ggufs");
  fs::create_directories(dir);
  test::WriteFile(dir + "/a-Q6_K.gguf", GgufBytes("llama", 5));
  auto folder = ResolveModel(dir, *catalog_);
  ASSERT_TRUE(folder) << folder.status().message();
  EXPECT_EQ(folder->gguf->path, dir + "/a-Q6_K.gguf");
  EXPECT_EQ(folder->location, ModelLocation::kPath);
  test::WriteFile(dir + "/b.gguf", GgufBytes("llama", 6));
  auto two = ResolveModel(dir, *catalog_);
  ASSERT_FALSE(two);
  EXPECT_NE(two.status().message().find(dir + "/b.gguf"), std::string::npos);
  auto file = ResolveModel(dir + "/b.gguf", *catalog_);
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->gguf->size_bytes, GgufBytes("llama", 6).size());
  test::WriteFile(dir + "/c.gguf", "not a gguf file");
  auto not_gguf = ResolveModel(dir + "/c.gguf", *catalog_);
  ASSERT_FALSE(not_gguf);
  EXPECT_EQ(not_gguf.status().code(), ErrorCode::kUnsupported);
  auto rows = ListGgufFolderModels(dir);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].location, ModelLocation::kFolder);
  EXPECT_EQ(rows[0].dtype, "Q6_K");
  EXPECT_EQ(rows[0].name, dir + "/a-Q6_K.gguf");
  EXPECT_EQ(rows[0].verification, "unverified");
  EXPECT_EQ(rows[2].location, ModelLocation::kFolder);
  EXPECT_TRUE(rows[2].verification.starts_with("refused: ")) << rows[2].verification;
  EXPECT_NE(rows[2].verification.find("not a GGUF file"), std::string::npos);
}

TEST_F(GgufStoresTest, NothingIsWrittenIntoTheStores) {
  PullTwoModels();
  WriteLmStudioFile("p/r/m.gguf", GgufBytes("llama", 1));
  // tessera's store holds a p/r too: the name is ambiguous to resolve, not to rm.
  SyntheticModelSpec spec;
  spec.vocab = 512;
  fs::create_directories(tmp_.File("models/p--r"));
  ASSERT_TRUE(WriteSyntheticModel(tmp_.File("models/p--r"), spec).ok());
  const auto before_ollama = Snapshot(ollama_);
  const auto before_lm = Snapshot(lmstudio_);
  ASSERT_TRUE(ListInstalledModels(*catalog_, /*rehash=*/true));
  auto r = ResolveModel("qwen2.5:0.5b", *catalog_);
  ASSERT_TRUE(r);
  ASSERT_TRUE(VerifyGgufModel(*r->gguf).ok());
  ASSERT_TRUE(ResolveModel(lmstudio_ + "/p/r/m.gguf", *catalog_));
  EXPECT_FALSE(ResolveModel("p/r", *catalog_));  // ambiguous
  auto removed = RemoveStoredModel("qwen2.5:0.5b", *catalog_);
  ASSERT_FALSE(removed);
  EXPECT_NE(removed.status().message().find("ollama rm"), std::string::npos)
      << removed.status().message();
  auto ours = RemoveStoredModel("p/r", *catalog_);  // tessera's copy only
  ASSERT_TRUE(ours) << ours.status().message();
  EXPECT_FALSE(fs::exists(tmp_.File("models/p--r")));
  auto lm = RemoveStoredModel("p/r", *catalog_);  // now only LM Studio's: refused
  ASSERT_FALSE(lm);
  EXPECT_NE(lm.status().message().find("LM Studio"), std::string::npos) << lm.status().message();
  EXPECT_EQ(Snapshot(ollama_), before_ollama);
  EXPECT_EQ(Snapshot(lmstudio_), before_lm);
}

TEST_F(GgufStoresTest, CliListsResolvesAndRefusesADamagedBlob) {
  PullTwoModels();
  WriteLmStudioFile("p/r/m-Q8_0.gguf", GgufBytes("llama", 1));
  const std::string folder = tmp_.File("ggufs");
  fs::create_directories(folder);
  test::WriteFile(folder + "/x-BF16.gguf", GgufBytes("llama", 7));

  auto r = Tessera({"list", "--json", "--folder", folder});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto rows = nlohmann::json::parse(r.out);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& row : rows) by_name[row["name"]] = row;
  ASSERT_TRUE(by_name.count("qwen2.5:0.5b")) << r.out;
  EXPECT_EQ(by_name["qwen2.5:0.5b"]["location"], "ollama");
  EXPECT_EQ(by_name["qwen2.5:0.5b"]["dtype"], "Q4_K_M");
  EXPECT_EQ(by_name["qwen2.5:0.5b"]["format"], "gguf");
  EXPECT_EQ(by_name["qwen2.5:0.5b"]["verification"], "verified");
  EXPECT_EQ(by_name["hf.co/user/repo:Q4_K_M"]["location"], "ollama");
  EXPECT_EQ(by_name["p/r/m-Q8_0.gguf"]["location"], "lmstudio");
  EXPECT_EQ(by_name["p/r/m-Q8_0.gguf"]["dtype"], "Q8_0");
  EXPECT_EQ(by_name[folder + "/x-BF16.gguf"]["location"], "folder");

  r = Tessera({"list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("qwen2.5:0.5b"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ollama"), std::string::npos);
  EXPECT_NE(r.out.find("lmstudio"), std::string::npos);

  r = Tessera({"resolve", "qwen2.5:0.5b", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto resolved = nlohmann::json::parse(r.out);
  EXPECT_EQ(resolved["location"], "ollama");
  EXPECT_EQ(resolved["system"], kSystem);
  EXPECT_EQ(resolved["template"], kTemplate);
  EXPECT_EQ(resolved["params"]["num_ctx"], 4096);
  EXPECT_EQ(resolved["params"]["ignored"], nlohmann::json::array({"mirostat"}));
  r = Tessera({"resolve", "qwen2.5:0.5b", "--verify"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, ollama_ + "/blobs/sha256-" + Sha256Hex(gguf_) + "\tollama\n");

  // A damaged blob: refused with one line, and `generate` names what it resolved to.
  std::string damaged = gguf_;
  damaged[50] ^= 1;
  test::WriteFile(ollama_ + "/blobs/sha256-" + Sha256Hex(gguf_), damaged);
  r = Tessera({"resolve", "qwen2.5:0.5b", "--verify"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("does not match its sha256"), std::string::npos) << r.err;
  r = Tessera({"list", "--verify", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& row : nlohmann::json::parse(r.out)) {
    if (row["name"] == "qwen2.5:0.5b") {
      EXPECT_TRUE(row["verification"].get<std::string>().starts_with("changed: "));
    }
  }
  r = Tessera({"generate", "--model", "p/r", "--prompt", "x"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("GGUF"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tessera
