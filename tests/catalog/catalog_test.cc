// The built-in catalog, hostile catalogs, and what a model name may be.
#include "catalog/catalog.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "catalog/model_names.h"
#include "catalog/pull.h"
#include "chat/chat_template.h"
#include "test_support.h"

namespace tessera {
namespace {

const Catalog& Builtin() {
  auto catalog = BuiltinCatalog();
  EXPECT_TRUE(catalog) << catalog.status().message();
  return **catalog;
}

TEST(CatalogTest, BuiltinListsTheSupportedModelsUnverified) {
  const Catalog& catalog = Builtin();
  for (const char* id :
       {"smollm2-135m-instruct", "smollm-135m-instruct", "smollm2-135m-sft",
        "qwen2.5-0.5b-instruct", "qwen3-0.6b", "qwen3-embedding-0.6b", "qwen3-reranker-0.6b",
        "qwen3guard-gen-0.6b", "decider-0.8b", "qwen3.5-2b", "minicpm5-2b", "gemma-3-1b-it",
        "llama-3.2-1b-instruct", "qwen3-embedding-4b", "qwen3-reranker-4b", "qwen3guard-gen-4b"}) {
    const CatalogEntry* e = catalog.Find(id);
    ASSERT_NE(e, nullptr) << id;
    // Nothing could be checked offline: no pinned commits, nothing claimed verified.
    EXPECT_FALSE(e->verified) << id;
    EXPECT_EQ(e->revision, "main") << id;
    EXPECT_TRUE(e->defaults.is_object()) << id;
  }
  EXPECT_EQ(catalog.entries().size(), 16u);
  EXPECT_EQ(catalog.Find("decider-0.8b")->purpose, "decide");
  EXPECT_EQ(catalog.Find("decider-0.8b")->architecture, "qwen3_5_text");
  EXPECT_EQ(catalog.Find("qwen3-embedding-4b")->purpose, "embed");
  EXPECT_EQ(catalog.Find("qwen3-reranker-4b")->purpose, "rerank");
  EXPECT_EQ(catalog.Find("qwen3guard-gen-4b")->purpose, "guard");
  EXPECT_EQ(catalog.Find("llama-3.2-1b-instruct")->tool_call_syntax, ToolCallSyntax::kLlama3Json);
  EXPECT_EQ(catalog.Find("qwen3-embedding-0.6b")->purpose, "embed");
  EXPECT_EQ(catalog.Find("qwen3-reranker-0.6b")->purpose, "rerank");
  EXPECT_EQ(catalog.Find("qwen3guard-gen-0.6b")->purpose, "guard");
  EXPECT_EQ(catalog.Find("qwen2.5-0.5b-instruct")->architecture, "qwen2");
  EXPECT_EQ(catalog.FindByRepo("qwen/qwen3-0.6b")->id, "qwen3-0.6b");
  EXPECT_EQ(catalog.Find("gpt-9"), nullptr);
}

// Every entry: its id and repository are names the other commands accept (and lead back to
// it), its context default is a positive integer, and what it does not pin says why.
TEST(CatalogTest, EveryBuiltinEntryIsUsableAndSaysWhatItPins) {
  const Catalog& catalog = Builtin();
  for (const CatalogEntry& e : catalog.entries()) {
    SCOPED_TRACE(e.id);
    auto by_id = ParseModelRef(e.id, catalog);
    ASSERT_TRUE(by_id) << by_id.status().message();
    EXPECT_EQ(by_id->entry, &e);
    EXPECT_EQ(by_id->store_name, e.id);
    auto by_repo = ParseModelRef(e.repo, catalog);
    ASSERT_TRUE(by_repo) << by_repo.status().message();
    EXPECT_EQ(by_repo->entry, &e);
    ASSERT_TRUE(e.defaults.contains("context"));
    ASSERT_TRUE(e.defaults["context"].is_number_integer());
    EXPECT_GT(e.defaults["context"].get<int64_t>(), 0);
    EXPECT_TRUE(e.verified || !e.unverified_reason.empty());
    EXPECT_EQ(DescribePin(e), "follows main; not pinned (catalog written offline)");
  }
}

TEST(CatalogTest, PinsAreDescribedPlainlyAndOnlyCommitsCanBeVerified) {
  CatalogEntry e;
  e.revision = "main";
  EXPECT_EQ(DescribePin(e), "follows main; not pinned");
  e.unverified_reason = "catalog written offline";
  EXPECT_EQ(DescribePin(e), "follows main; not pinned (catalog written offline)");
  const std::string commit = "0123456789abcdef0123456789abcdef01234567";
  e.revision = commit;
  EXPECT_EQ(DescribePin(e), "pinned to " + commit + ", not checked (catalog written offline)");
  e.verified = true;
  EXPECT_EQ(DescribePin(e), "pinned to " + commit + " (checked)");

  const std::string head = R"({"models":[{"id":"a","repo":"o/a","architecture":"qwen3",)"
                           R"("purpose":"decide",)";
  auto pinned = ParseCatalog(head + R"("revision":")" + commit + R"(","verified":true}]})", "t");
  ASSERT_TRUE(pinned) << pinned.status().message();
  EXPECT_EQ(pinned->Find("a")->purpose, "decide");
  // A branch moves: it cannot have been verified.
  auto branch = ParseCatalog(head + R"("revision":"main","verified":true}]})", "t");
  ASSERT_FALSE(branch);
  EXPECT_NE(branch.status().message().find("40-digit commit"), std::string::npos);
  EXPECT_FALSE(
      ParseCatalog(head + R"("revision":"main","verified":false,"unverified_reason":7}]})", "t"));
}

TEST(CatalogTest, EveryChatEntryDeclaresTheToolCallSyntaxItsTemplateTeaches) {
  const Catalog& catalog = Builtin();
  for (const CatalogEntry& e : catalog.entries()) {
    if (e.purpose == "chat") {
      EXPECT_TRUE(e.tool_call_syntax.has_value()) << e.id;
    }
  }
  // The real templates of these entries (../shared/tokenizers: the same chat template as the
  // catalog's repository, see its README): the declaration is what the template teaches.
  struct Case {
    const char* id;
    const char* folder;
  };
  // Qwen3.5-4B's template is the Qwen3.5 family's; MiniCPM-V 4.5's is the only MiniCPM
  // template here (MiniCPM5-2B's own was not available offline; the entry says so).
  for (const Case& c :
       {Case{"qwen2.5-0.5b-instruct", "Qwen2.5-1.5B-Instruct"}, Case{"qwen3-0.6b", "Qwen3-4B"},
        Case{"qwen3.5-2b", "Qwen3.5-4B"}, Case{"minicpm5-2b", "MiniCPM-V-4_5"}}) {
    SCOPED_TRACE(c.id);
    const CatalogEntry* e = catalog.Find(c.id);
    ASSERT_NE(e, nullptr);
    auto tmpl = LoadChatTemplateConfig(test::SharedDir() + "/tokenizers/" + c.folder);
    ASSERT_TRUE(tmpl) << tmpl.status().message();
    EXPECT_TRUE(tmpl->renders_tools);
    ASSERT_TRUE(e->tool_call_syntax.has_value());
    EXPECT_EQ(*e->tool_call_syntax, DetectToolCallSyntax(tmpl->source));
  }
  // Gemma 3's template renders no tools, so the entry declares none.
  auto gemma = LoadChatTemplateConfig(test::SharedDir() + "/tokenizers/gemma-3-1b-it");
  ASSERT_TRUE(gemma) << gemma.status().message();
  EXPECT_FALSE(gemma->renders_tools);
  EXPECT_EQ(catalog.Find("gemma-3-1b-it")->tool_call_syntax, ToolCallSyntax::kNone);
}

TEST(CatalogTest, RefusesUnknownOrMissingToolCallSyntaxes) {
  const std::string head = R"({"models":[{"id":"a","repo":"o/a","revision":"main",)"
                           R"("verified":false,"architecture":"llama",)";
  auto parsed = ParseCatalog(head + R"("purpose":"chat","tool_call_syntax":"qwen3_xml"}]})", "t");
  ASSERT_TRUE(parsed) << parsed.status().message();
  EXPECT_EQ(parsed->Find("a")->tool_call_syntax, ToolCallSyntax::kQwen3Xml);
  // Other purposes may leave it out.
  parsed = ParseCatalog(head + R"("purpose":"embed"}]})", "t");
  ASSERT_TRUE(parsed) << parsed.status().message();
  EXPECT_FALSE(parsed->Find("a")->tool_call_syntax.has_value());
  for (const std::string& bad :
       {std::string(R"("purpose":"chat"}]})"),
        std::string(R"("purpose":"chat","tool_call_syntax":"mistral"}]})"),
        std::string(R"("purpose":"chat","tool_call_syntax":1}]})"),
        std::string(R"("purpose":"embed","tool_call_syntax":"hermes_v2"}]})")}) {
    auto refused = ParseCatalog(head + bad, "t");
    ASSERT_FALSE(refused) << bad;
    const std::string message = refused.status().message();
    // Says which entry and field, and what the field may be.
    EXPECT_NE(message.find("models[0]"), std::string::npos) << message;
    EXPECT_NE(message.find("tool_call_syntax"), std::string::npos) << message;
    EXPECT_NE(message.find(ToolCallSyntaxNames()), std::string::npos) << message;
  }
}

TEST(CatalogTest, RefusesMalformedCatalogs) {
  const std::string good_entry =
      R"({"id":"a","repo":"o/a","revision":"main","verified":false,"purpose":"chat",)"
      R"("architecture":"llama","tool_call_syntax":"none"})";
  EXPECT_TRUE(ParseCatalog(R"({"models":[)" + good_entry + "]}", "t"));
  const std::vector<std::string> bad_catalogs = {
      std::string("[]"),
      std::string("{\"models\":{}}"),
      std::string("{\"models\":[1]}"),
      std::string("{\"models\":[") + good_entry + "," + good_entry + "]}",  // duplicate
      std::string(R"({"models":[{"id":"../a","repo":"o/a","revision":"main",)"
                  R"("verified":false,"purpose":"chat","architecture":"llama"}]})"),
      std::string(R"({"models":[{"id":"a","repo":"a","revision":"main",)"
                  R"("verified":false,"purpose":"chat","architecture":"llama"}]})"),
      std::string(R"({"models":[{"id":"a","repo":"o/a","revision":"main",)"
                  R"("verified":"no","purpose":"chat","architecture":"llama"}]})"),
      std::string(R"({"models":[{"id":"a","repo":"o/a","revision":"main",)"
                  R"("verified":false,"purpose":"dance","architecture":"llama"}]})"),
      std::string("{\"models\":[") + "\xff" + "]}",
  };
  for (const std::string& bad : bad_catalogs) {
    auto parsed = ParseCatalog(bad, "t");
    EXPECT_FALSE(parsed) << bad;
  }
}

TEST(ModelNamesTest, RefusesBadNamesWithAClearMessage) {
  const Catalog& catalog = Builtin();
  const std::string long_name(97, 'a');
  const std::vector<std::string> bad_names = {std::string(""),
                                              std::string("../x"),
                                              std::string("/etc/passwd"),
                                              std::string("./m"),
                                              std::string("~/m"),
                                              std::string(".."),
                                              std::string("a/../b"),
                                              std::string("org/.."),
                                              std::string("org/.hidden"),
                                              std::string("org/a b"),
                                              std::string("org/a\\b"),
                                              std::string("org/a--b"),
                                              std::string("a/b/c"),
                                              std::string("org/") + long_name,
                                              long_name,
                                              std::string("qwen3-0.6b@"),
                                              std::string("qwen3-0.6b@../x"),
                                              std::string("qwen3-0.6b@-x"),
                                              std::string("org/a\nb"),
                                              std::string("org/a%2e")};
  for (const std::string& bad : bad_names) {
    auto spec = ParseModelRef(bad, catalog);
    ASSERT_FALSE(spec) << bad;
    const std::string message = spec.status().message();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_FALSE(message.empty());
  }
  // Unknown ids name the known ones.
  auto unknown = ParseModelRef("gpt-9", catalog);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.status().message().find("qwen3-0.6b"), std::string::npos);
}

TEST(ModelNamesTest, ParsesIdsReposAndRevisions) {
  const Catalog& catalog = Builtin();
  auto id = ParseModelRef("qwen3-0.6b", catalog);
  ASSERT_TRUE(id) << id.status().message();
  EXPECT_EQ(id->repo, "Qwen/Qwen3-0.6B");
  EXPECT_EQ(id->store_name, "qwen3-0.6b");
  EXPECT_EQ(id->revision, "main");
  EXPECT_FALSE(id->revision_given);

  // A repository the catalog knows is stored under its id.
  auto known_repo = ParseModelRef("Qwen/Qwen3-0.6B@refs/pr/1", catalog);
  ASSERT_TRUE(known_repo) << known_repo.status().message();
  EXPECT_EQ(known_repo->store_name, "qwen3-0.6b");
  EXPECT_EQ(known_repo->revision, "refs/pr/1");
  EXPECT_TRUE(known_repo->revision_given);

  auto other =
      ParseModelRef("my-org/My_Model.v2@0123456789abcdef0123456789abcdef01234567", catalog);
  ASSERT_TRUE(other) << other.status().message();
  EXPECT_EQ(other->store_name, "my-org--My_Model.v2");
  EXPECT_EQ(other->entry, nullptr);
  EXPECT_TRUE(IsCommitId(other->revision));
  EXPECT_FALSE(IsCommitId("main"));
}

TEST(HubMetadataTest, KeepsOnlyNeededFilesWithTheirHashes) {
  const std::string sha(64, 'a');
  const std::string body = R"({"sha":"0123456789abcdef0123456789abcdef01234567","siblings":[)"
                           R"({"rfilename":"README.md"},)"
                           R"({"rfilename":"config.json","size":10,"blobId":"x"},)"
                           R"({"rfilename":"onnx/model.safetensors","size":1},)"
                           R"({"rfilename":"model.safetensors","size":5,"lfs":{"sha256":")" +
                           sha + R"(","size":7}}]})";
  auto parsed = ParseHubRevision(body, "o/m");
  ASSERT_TRUE(parsed) << parsed.status().message();
  ASSERT_EQ(parsed->files.size(), 2u);
  EXPECT_EQ(parsed->files[0].name, "config.json");
  EXPECT_EQ(*parsed->files[0].size, 10u);
  EXPECT_EQ(parsed->files[1].lfs_sha256, sha);
  EXPECT_EQ(*parsed->files[1].size, 7u);  // the LFS size wins over the pointer's
}

TEST(HubMetadataTest, RefusesHostileFileLists) {
  const std::string commit = R"("sha":"0123456789abcdef0123456789abcdef01234567")";
  const std::string config = R"({"rfilename":"config.json"})";
  const std::string weights =
      R"({"rfilename":"model.safetensors","lfs":{"sha256":")" + std::string(64, 'b') + R"("}})";
  const std::vector<std::string> bodies = {
      "",
      "[]",
      "{",
      std::string(100000, '['),
      R"({"sha":"main","siblings":[]})",
      "{" + commit + "}",
      "{" + commit + R"(,"siblings":{}})",
      "{" + commit + R"(,"siblings":[1]})",
      "{" + commit + R"(,"siblings":[{"rfilename":7}]})",
      "{" + commit + R"(,"siblings":[)" + config + "]}",   // no weights
      "{" + commit + R"(,"siblings":[)" + weights + "]}",  // no config
      "{" + commit + R"(,"siblings":[)" + config + "," + weights + "," + weights + "]}",
      "{" + commit + R"(,"siblings":[)" + config +
          R"(,{"rfilename":"model.safetensors","size":3}]})",  // weights without a hash
      "{" + commit + R"(,"siblings":[)" + config +
          R"(,{"rfilename":"model.safetensors","lfs":{"sha256":"../../etc"}}]})",
      "{" + commit + R"(,"siblings":[)" + config +
          R"(,{"rfilename":"model.safetensors","lfs":{"sha256":")" + std::string(64, 'G') +
          R"("}}]})",
      "{" + commit + R"(,"siblings":[)" + config + "," + weights + "]}\xff",
  };
  for (const auto& body : bodies) {
    auto parsed = ParseHubRevision(body, "o/m");
    EXPECT_FALSE(parsed) << body.substr(0, 80);
  }
  // A list with very many weight files is bounded.
  std::string many = "{" + commit + R"(,"siblings":[)" + config;
  for (int i = 0; i < 5000; ++i) {
    many += R"(,{"rfilename":"w)" + std::to_string(i) + R"(.safetensors","lfs":{"sha256":")" +
            std::string(64, 'c') + R"("}})";
  }
  many += "]}";
  auto parsed = ParseHubRevision(many, "o/m");
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.status().message().find("more than"), std::string::npos);
}

TEST(HubMetadataTest, OnlyPlainTopLevelModelFilesAreNeeded) {
  for (const char* name :
       {"config.json", "generation_config.json", "model.safetensors",
        "model-00001-of-00002.safetensors", "model.safetensors.index.json", "tokenizer.json",
        "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"}) {
    EXPECT_TRUE(IsNeededModelFile(name)) << name;
  }
  for (const char* name :
       {"README.md", "pytorch_model.bin", "onnx/model.safetensors", "../model.safetensors",
        ".safetensors", "-x.safetensors", "a b.safetensors", "model.gguf", "vocab.json", ""}) {
    EXPECT_FALSE(IsNeededModelFile(name)) << name;
  }
}

}  // namespace
}  // namespace tessera
