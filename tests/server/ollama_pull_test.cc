// POST /api/pull's parts (ollama_pull.h): the body's fields (each mapped or refused by name),
// which names tessera pulls (a catalog id or ORG/REPO, Ollama's ":latest" allowed; registry
// names and the built-in model refused with what to do), and the progress lines in Ollama's
// shape and order from the pull's callbacks.
#include "server/ollama_pull.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessera::server {
namespace {

using ojson = nlohmann::ordered_json;

const Catalog& TestCatalog() {
  static const Catalog catalog = [] {
    CatalogEntry e;
    e.id = "tiny-chat";
    e.repo = "Org/Tiny-Chat";
    e.revision = "main";
    e.purpose = "chat";
    return Catalog({e});
  }();
  return catalog;
}

// The refused field of a parse, or "" when the body was accepted.
std::string Param(const std::variant<OllamaPullRequest, ApiError>& r) {
  const ApiError* e = std::get_if<ApiError>(&r);
  return e == nullptr ? "" : e->param;
}

TEST(OllamaPullRequest, ModelOrNameAndStream) {
  auto r = ParseOllamaPull(ojson{{"model", "tiny-chat"}});
  ASSERT_TRUE(std::holds_alternative<OllamaPullRequest>(r));
  EXPECT_EQ(std::get<OllamaPullRequest>(r).name, "tiny-chat");
  EXPECT_TRUE(std::get<OllamaPullRequest>(r).stream);  // Ollama's default
  // The npm client sends the older "name"; "insecure" is accepted and changes nothing.
  r = ParseOllamaPull(ojson{{"name", "Org/Tiny-Chat"}, {"stream", false}, {"insecure", true}});
  ASSERT_TRUE(std::holds_alternative<OllamaPullRequest>(r));
  EXPECT_EQ(std::get<OllamaPullRequest>(r).name, "Org/Tiny-Chat");
  EXPECT_FALSE(std::get<OllamaPullRequest>(r).stream);
}

TEST(OllamaPullRequest, RefusalsNameTheirField) {
  EXPECT_EQ(Param(ParseOllamaPull(ojson::object())), "model");
  EXPECT_EQ(Param(ParseOllamaPull(ojson{{"model", 3}})), "model");
  EXPECT_EQ(Param(ParseOllamaPull(ojson{{"model", "x"}, {"stream", "no"}})), "stream");
  auto r = ParseOllamaPull(ojson{{"model", "x"}, {"password", "secret"}});
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).param, "password");
  EXPECT_NE(std::get<ApiError>(r).message.find("HF_TOKEN"), std::string::npos);
  r = ParseOllamaPull(ojson{{"model", "x"}, {"quantize", "q4_K_M"}});
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).param, "quantize");
  // Go's omitempty: empty credentials are what old clients send.
  EXPECT_TRUE(std::holds_alternative<OllamaPullRequest>(
      ParseOllamaPull(ojson{{"model", "x"}, {"username", ""}, {"password", ""}})));
}

TEST(OllamaPullTarget, CatalogIdsAndRepositories) {
  auto t = OllamaPullTarget("tiny-chat", TestCatalog());
  ASSERT_TRUE(std::holds_alternative<ModelRef>(t));
  EXPECT_EQ(std::get<ModelRef>(t).repo, "Org/Tiny-Chat");
  EXPECT_EQ(ServedNameOfPull(std::get<ModelRef>(t)), "tiny-chat");
  // Ollama's default tag is the name itself.
  t = OllamaPullTarget("tiny-chat:latest", TestCatalog());
  ASSERT_TRUE(std::holds_alternative<ModelRef>(t));
  EXPECT_EQ(std::get<ModelRef>(t).store_name, "tiny-chat");
  // A repository the catalog knows is stored and served under its catalog id.
  t = OllamaPullTarget("Org/Tiny-Chat", TestCatalog());
  ASSERT_TRUE(std::holds_alternative<ModelRef>(t));
  EXPECT_EQ(ServedNameOfPull(std::get<ModelRef>(t)), "tiny-chat");
  t = OllamaPullTarget("other-org/model@v2", TestCatalog());
  ASSERT_TRUE(std::holds_alternative<ModelRef>(t));
  EXPECT_EQ(std::get<ModelRef>(t).revision, "v2");
  EXPECT_EQ(ServedNameOfPull(std::get<ModelRef>(t)), "other-org/model");
}

TEST(OllamaPullTarget, RefusedNamesSayWhatToDo) {
  for (const char* name : {"qwen3:0.6b", "hf.co/bartowski/Qwen3-GGUF:Q4_K_M"}) {
    auto t = OllamaPullTarget(name, TestCatalog());
    ASSERT_TRUE(std::holds_alternative<ApiError>(t)) << name;
    const ApiError& e = std::get<ApiError>(t);
    EXPECT_EQ(e.status, 400);
    EXPECT_NE(e.message.find("Ollama registry name"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("tessera list --catalog"), std::string::npos) << e.message;
  }
  auto t = OllamaPullTarget("stories260k", TestCatalog());
  ASSERT_TRUE(std::holds_alternative<ApiError>(t));
  EXPECT_NE(std::get<ApiError>(t).message.find("built-in"), std::string::npos);
  for (const char* name : {"../etc", "a/b/c", "unknown-name"}) {
    t = OllamaPullTarget(name, TestCatalog());
    ASSERT_TRUE(std::holds_alternative<ApiError>(t)) << name;
    EXPECT_EQ(std::get<ApiError>(t).param, "model");
    EXPECT_NE(std::get<ApiError>(t).message.find(name), std::string::npos);
  }
}

RemoteRevision TwoFiles() {
  RemoteRevision r;
  r.commit = std::string(40, 'a');
  r.files.push_back({"config.json", 500, "", std::string(40, 'b')});
  r.files.push_back({"model.safetensors", 1000, std::string(64, 'c'), ""});
  return r;
}

std::vector<ojson> Lines(const std::function<void(OllamaPullProgress&)>& run) {
  std::vector<ojson> lines;
  OllamaPullProgress p([&](ojson line) { lines.push_back(std::move(line)); });
  run(p);
  return lines;
}

std::vector<std::string> Statuses(const std::vector<ojson>& lines) {
  std::vector<std::string> out;
  for (const ojson& l : lines) out.push_back(l["status"]);
  return out;
}

TEST(OllamaPullProgress, OllamasOrderAndShape) {
  auto lines = Lines([](OllamaPullProgress& p) {
    p.Begin();
    p.Listed(TwoFiles());
    p.File({.phase = "config.json", .done = 500, .total = 500, .finished = true});
    p.File({.phase = "model.safetensors", .done = 0, .total = 1000});
    p.File({.phase = "model.safetensors", .done = 4, .total = 1000});  // same percent: dropped
    p.File({.phase = "model.safetensors", .done = 500, .total = 1000});
    p.File({.phase = "model.safetensors", .done = 1000, .total = 1000, .finished = true});
    p.Installing();
    p.Finish();
  });
  const std::string hex12 = std::string(12, 'c');
  EXPECT_EQ(Statuses(lines),
            (std::vector<std::string>{"pulling manifest", "pulling config.json", "pulling " + hex12,
                                      "pulling " + hex12, "pulling " + hex12,
                                      "verifying sha256 digest", "writing manifest", "success"}));
  // A Git file: named, no digest. An LFS file: its digest; zeros left out as Go's omitempty.
  EXPECT_EQ(lines[1].dump(), R"({"status":"pulling config.json","total":500,"completed":500})");
  EXPECT_EQ(lines[2].dump(), R"({"status":"pulling )" + hex12 + R"(","digest":"sha256:)" +
                                 std::string(64, 'c') + R"(","total":1000})");
  EXPECT_EQ(lines[4]["completed"], 1000);
  EXPECT_EQ(lines.back().dump(), R"({"status":"success"})");
}

TEST(OllamaPullProgress, FilesNotDownloadedAreShownCompleteOnce) {
  // Already current: nothing downloaded, no Installing call.
  auto lines = Lines([](OllamaPullProgress& p) {
    p.Begin();
    p.Listed(TwoFiles());
    p.File({.phase = "unlisted.bin", .done = 1, .total = 2});  // not a listed file: ignored
    p.Finish();
  });
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[1]["completed"], 500);
  EXPECT_EQ(lines[2]["completed"], 1000);
  EXPECT_EQ(Statuses(lines).back(), "success");
  // A file that finished is not shown again at the end.
  lines = Lines([](OllamaPullProgress& p) {
    p.Listed(TwoFiles());
    p.File({.phase = "model.safetensors", .done = 1000, .total = 1000, .finished = true});
    p.File({.phase = "model.safetensors", .done = 1000, .total = 1000, .finished = true});
    p.Finish();
  });
  int weight_lines = 0;
  for (const ojson& l : lines) weight_lines += l.contains("digest");
  EXPECT_EQ(weight_lines, 1);
}

TEST(OllamaPullProgress, AFailedPullEndsWithoutSuccess) {
  auto lines = Lines([](OllamaPullProgress& p) {
    p.Begin();
    p.Listed(TwoFiles());
    p.File({.phase = "model.safetensors", .done = 300, .total = 1000});
  });
  EXPECT_EQ(Statuses(lines),
            (std::vector<std::string>{"pulling manifest", "pulling " + std::string(12, 'c')}));
}

}  // namespace
}  // namespace tessera::server
