// serve's --kind NAME=KIND over the kinds the checkpoints say (ResolveModelKinds): a causal LM
// without a chat template is a completion model and stays one (rerankers, guards and deciders
// put their questions through the chat template), and a chat model cannot be declared one.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <string>
#include <vector>

#include "test_support.h"
#include "worker/worker.h"

namespace tessera::worker {
namespace {

const char* kCausalConfig = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama"})";

class ModelKindFlag : public ::testing::Test {
 protected:
  void SetUp() override {
    ::mkdir(tmp_.File("stories").c_str(), 0755);
    test::WriteFile(tmp_.File("stories/config.json"), kCausalConfig);
    test::WriteFile(tmp_.File("stories/tokenizer_config.json"), R"({"bos_token": "<s>"})");
    ::mkdir(tmp_.File("chat").c_str(), 0755);
    test::WriteFile(tmp_.File("chat/config.json"), kCausalConfig);
    test::WriteFile(tmp_.File("chat/chat_template.jinja"), "{{ messages }}");
  }
  std::vector<ModelEntry> Served() const {
    return {{"stories", tmp_.File("stories")}, {"chat", tmp_.File("chat")}};
  }
  test::TempDir tmp_;
};

TEST_F(ModelKindFlag, ACheckpointWithoutAChatTemplateIsACompletionModel) {
  std::vector<ModelEntry> models = Served();
  ASSERT_TRUE(ResolveModelKinds(models, {}).ok());
  EXPECT_EQ(models[0].kind, ModelKind::kCompletion);
  EXPECT_EQ(models[1].kind, ModelKind::kChat);
  ASSERT_TRUE(ResolveModelKinds(models, {"stories=completion", "chat=decide"}).ok());
  EXPECT_EQ(models[0].kind, ModelKind::kCompletion);
  EXPECT_EQ(models[1].kind, ModelKind::kDecide);
}

TEST_F(ModelKindFlag, ACompletionModelCannotBeDeclaredAnotherCausalKindNorTheReverse) {
  for (const char* kind : {"chat", "rerank", "guard", "decide"}) {
    std::vector<ModelEntry> models = Served();
    Status st = ResolveModelKinds(models, {std::string("stories=") + kind});
    ASSERT_FALSE(st.ok()) << kind;
    EXPECT_NE(st.message().find("'stories' has no chat template, so it is a completion model"),
              std::string::npos)
        << st.message();
  }
  std::vector<ModelEntry> models = Served();
  Status st = ResolveModelKinds(models, {"chat=completion"});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'chat' has one, so it is a chat model"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace tessera::worker
