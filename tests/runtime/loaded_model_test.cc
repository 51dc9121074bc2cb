// LoadedModel on the real stories260k: text encoded with the checkpoint's BOS policy, every
// reference case generated through the scheduler with all cases running at once (8 slots)
// equal to run.c's greedy ids, and TextStream's text equal to the reference completion text.
#include "runtime/loaded_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/cpu_report.h"
#include "catalog/catalog.h"
#include "catalog/model_store.h"
#include "model/synthetic_checkpoint.h"
#include "runtime/text_stream.h"
#include "test_support.h"

namespace tessera {
namespace {

std::string StoriesDir() {
  return test::SharedDir() + "/models/stories260k";
}

nlohmann::json Cases() {
  std::ifstream in(StoriesDir() + "/reference_greedy.json");
  return nlohmann::json::parse(in)["cases"];
}

std::unique_ptr<LoadedModel> Open(int parallel) {
  ModelLoadOptions o;
  o.placement = "cpu";
  o.weights = WeightFormat::kF32;
  o.kv_cache = KvCacheType::kF32;  // exact, to match run.c token for token
  o.parallel = parallel;
  o.package_cache = false;  // tests never write next to ../shared
  auto m = LoadedModel::Open(StoriesDir(), o);
  EXPECT_TRUE(m) << m.status().message();
  return m ? std::move(*m) : nullptr;
}

TEST(LoadedModel, ReferenceCasesAllAtOnceMatchRunC) {
  auto m = Open(8);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->slots(), 8);
  const nlohmann::json cases = Cases();
  ASSERT_GT(cases.size(), 3u);
  struct Out {
    std::vector<int32_t> ids;
    std::string text;
  };
  std::map<size_t, Out> outs;
  std::vector<std::unique_ptr<TextStream>> streams;
  for (size_t i = 0; i < cases.size(); ++i) {
    const nlohmann::json& c = cases[i];
    auto ids = m->EncodeText(c["prompt"].get<std::string>(), /*add_special=*/true);
    ASSERT_TRUE(ids) << ids.status().message();
    EXPECT_EQ(*ids, c["prompt_ids"].get<std::vector<int32_t>>()) << c["id"];
    streams.push_back(std::make_unique<TextStream>(m->tokenizer(), *ids, TextStreamOptions{},
                                                   std::vector<int32_t>{1}));
    TextStream* stream = streams.back().get();
    SequenceRequest req;
    req.prompt_ids = *ids;
    req.max_new_tokens = c["max_new_tokens"].get<int64_t>();
    req.stop_ids = {1};  // run.c stops at BOS (see the reference's semantics)
    req.on_token = [&outs, stream, i](int32_t id) {
      if (id != 1) outs[i].ids.push_back(id);
      outs[i].text += stream->Push(id, {}).text;
      return true;
    };
    req.on_finish = [&outs, stream, i](const SequenceResult&) { outs[i].text += stream->Finish(); };
    ASSERT_TRUE(m->scheduler().Submit(std::move(req)));
  }
  for (int guard = 0; guard < 100000 && m->scheduler().HasWork(); ++guard)
    ASSERT_TRUE(m->scheduler().Step().ok());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i]["id"].get<std::string>());
    EXPECT_EQ(outs[i].ids, cases[i]["generated_ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(outs[i].text, cases[i]["completion_text"].get<std::string>());
  }
}

TEST(LoadedModel, RefusesWhatItCannotOpen) {
  ModelLoadOptions o;
  o.package_cache = false;
  test::TempDir tmp;
  EXPECT_FALSE(LoadedModel::Open(tmp.path(), o));  // no config.json
  o.placement = "bogus";
  EXPECT_FALSE(LoadedModel::Open(StoriesDir(), o));
  auto m = Open(1);
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->RenderChat(nlohmann::ordered_json::array(), {}));  // no chat template
}

// The load log's description names the cpu backend's kernel family and decode prefetch (the
// best this CPU runs, or --cpu-isa's), and says nothing of the cpu when no stage runs there.
TEST(LoadedModel, DescribeNamesTheCpuKernelChoice) {
  auto best = Open(1);
  ASSERT_TRUE(best);
  EXPECT_NE(best->Describe().find("; cpu: " + CpuKernelChoiceText(DetectCpuIsa())),
            std::string::npos)
      << best->Describe();
  ModelLoadOptions o;
  o.weights = WeightFormat::kF32;
  o.package_cache = false;
  o.cpu_isa = CpuIsa::kScalar;
  auto scalar = LoadedModel::Open(StoriesDir(), o);
  ASSERT_TRUE(scalar) << scalar.status().message();
  EXPECT_NE((*scalar)->Describe().find("; cpu: scalar kernels, decode prefetch none"),
            std::string::npos)
      << (*scalar)->Describe();
  o.placement = "reference";
  auto reference = LoadedModel::Open(StoriesDir(), o);
  ASSERT_TRUE(reference) << reference.status().message();
  EXPECT_EQ((*reference)->Describe().find("cpu:"), std::string::npos) << (*reference)->Describe();
}

TEST(LoadedModel, KvMemoryBudgetSetsTheContextOrRefuses) {
  ModelLoadOptions o;
  o.package_cache = false;
  o.parallel = 8;
  o.kv_memory_mib = 64;
  auto roomy = LoadedModel::Open(StoriesDir(), o);
  ASSERT_TRUE(roomy) << roomy.status().message();
  EXPECT_EQ((*roomy)->context(), (*roomy)->checkpoint().config.max_position_embeddings);
  EXPECT_LE((*roomy)->kv_bytes(), 64u << 20);
  // The pool is what the budget holds, shared: more than 8 whole contexts of this tiny model.
  const int64_t context_blocks = KvBlocksFor((*roomy)->context());
  EXPECT_GT((*roomy)->scheduler().kv_pool().blocks(), 8 * context_blocks);
  EXPECT_GT((*roomy)->kv_bytes(), 60u << 20);
  // 40 slots, an fp32 cache (5 layers x keys and values x 4 bytes x 32 values = 1280 bytes a
  // position, 40 KiB a block): 1 MiB holds 25 blocks, fewer than the slots.
  o.parallel = 40;
  o.kv_cache = KvCacheType::kF32;
  o.kv_memory_mib = 1;
  auto tight = LoadedModel::Open(StoriesDir(), o);
  ASSERT_FALSE(tight);
  EXPECT_NE(tight.status().message().find("--kv-memory"), std::string::npos);
  EXPECT_NE(tight.status().message().find("25 KV blocks"), std::string::npos)
      << tight.status().message();
}

TEST(LoadedModel, TaskModelsGetAPoolOfOneContextPlusAChunkPerOtherSlot) {
  // One whole context plus, per other slot, a prefill chunk's blocks and the admission spare.
  EXPECT_EQ(TaskKvPoolBlocks(4096, 4),
            KvBlocksFor(4096) + 3 * (KvBlocksFor(kPrefillChunkTokens) + 1));
  EXPECT_EQ(TaskKvPoolBlocks(4096, 1), KvBlocksFor(4096));
  ModelLoadOptions o;
  o.package_cache = false;
  o.parallel = 4;
  auto chat = LoadedModel::Open(StoriesDir(), o);
  ASSERT_TRUE(chat) << chat.status().message();
  o.task_model = true;
  std::vector<std::string> log;
  auto task = LoadedModel::Open(StoriesDir(), o, [&](const std::string& l) { log.push_back(l); });
  ASSERT_TRUE(task) << task.status().message();
  const int64_t context = (*task)->context();
  EXPECT_EQ(context, (*chat)->context());  // the context a sequence may use is unchanged
  EXPECT_EQ((*chat)->scheduler().kv_pool().blocks(), 4 * KvBlocksFor(context));
  EXPECT_EQ((*task)->scheduler().kv_pool().blocks(), TaskKvPoolBlocks(context, 4));
  EXPECT_LT((*task)->kv_bytes(), (*chat)->kv_bytes());
  // The load log says which rule sized the pool.
  bool said = false;
  for (const auto& line : log) said = said || line.find("a task model's") != std::string::npos;
  EXPECT_TRUE(said);
  // An explicit budget is the operator's: the task rule does not apply.
  o.kv_memory_mib = 4;
  auto budgeted = LoadedModel::Open(StoriesDir(), o);
  ASSERT_TRUE(budgeted) << budgeted.status().message();
  EXPECT_GT((*budgeted)->scheduler().kv_pool().blocks(), TaskKvPoolBlocks(context, 4));
}

TEST(LoadedModel, DefaultSlotsFollowCoresAndMemory) {
  std::string why;
  EXPECT_EQ(DefaultParallelSlots(2, 24ull << 30, 100ull << 20, &why), 4);
  EXPECT_NE(why.find("2 cores"), std::string::npos);
  EXPECT_EQ(DefaultParallelSlots(16, 24ull << 30, 100ull << 20, &why), 8);
  EXPECT_EQ(DefaultParallelSlots(16, 1ull << 30, 100ull << 20, &why), 2);  // 256 MiB budget
  EXPECT_NE(why.find("quarter"), std::string::npos);
  EXPECT_EQ(DefaultParallelSlots(16, 1ull << 30, 1ull << 30, &why), 1);
}

// A tiny random-weights model of `family` for WriteSyntheticModel (its tokenizer and ChatML
// template come with it).
SyntheticModelSpec TinyChatSpec(ModelFamily family, int layers) {
  SyntheticModelSpec spec;
  spec.family = family;
  spec.hidden = 64;
  spec.intermediate = 96;
  spec.layers = layers;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.head_dim = 16;
  spec.vocab = 4352;
  spec.max_position = 512;
  return spec;
}

// SharedChatBeginning: on a model that keeps recurrent states (a tiny synthetic Qwen3.5 with a
// tokenizer and chat template), a chat's ids up to where its last user message starts, i.e.
// the ids it shares with any chat that begins with the same messages; 0 without a message
// before the last user message, and 0 on a model without recurrent layers.
TEST(LoadedModel, SharedChatBeginningIsWhereTheLastUserMessageStarts) {
  test::TempDir tmp;
  SyntheticModelSpec spec = TinyChatSpec(ModelFamily::kQwen3_5, 4);
  ASSERT_TRUE(WriteSyntheticModel(tmp.File("hybrid"), spec).ok());
  spec.family = ModelFamily::kQwen3;
  spec.layers = 2;
  ASSERT_TRUE(WriteSyntheticModel(tmp.File("plain"), spec).ok());
  ModelLoadOptions o;
  o.placement = "cpu";
  o.parallel = 2;
  o.package_cache = false;
  auto hybrid = LoadedModel::Open(tmp.File("hybrid"), o);
  ASSERT_TRUE(hybrid) << hybrid.status().message();
  auto plain = LoadedModel::Open(tmp.File("plain"), o);
  ASSERT_TRUE(plain) << plain.status().message();
  ASSERT_GT((*hybrid)->executor().kept_states(), 0);
  ASSERT_EQ((*plain)->executor().kept_states(), 0);
  using J = nlohmann::ordered_json;
  const J system = {{"role", "system"}, {"content", "You answer questions about the weather."}};
  const J history = J::array({system,
                              {{"role", "user"}, {"content", "Is it cold?"}},
                              {{"role", "assistant"}, {"content", "Yes, quite."}}});
  for (const J& before : {J::array({system}), history}) {
    J one = before, two = before;
    one.push_back({{"role", "user"}, {"content", "Will it rain tomorrow?"}});
    two.push_back({{"role", "user"}, {"content", "What about snow on Sunday?"}});
    auto a = (*hybrid)->RenderChat(one, J::object());
    auto b = (*hybrid)->RenderChat(two, J::object());
    auto head = (*hybrid)->RenderChat(before, J::object(), false);
    ASSERT_TRUE(a && b && head);
    const int64_t shared_a = (*hybrid)->SharedChatBeginning(one, J::object(), a->ids);
    const int64_t shared_b = (*hybrid)->SharedChatBeginning(two, J::object(), b->ids);
    // All of the earlier messages' ids but at most the last, where the texts join.
    EXPECT_GE(shared_a + 1, static_cast<int64_t>(head->ids.size()));
    EXPECT_LE(shared_a, static_cast<int64_t>(head->ids.size()));
    EXPECT_EQ(shared_a, shared_b);
    EXPECT_TRUE(std::equal(a->ids.begin(), a->ids.begin() + shared_a, b->ids.begin()));
    EXPECT_EQ((*plain)->SharedChatBeginning(one, J::object(), a->ids), 0);
  }
  const J lone = J::array({{{"role", "user"}, {"content", "Hello"}}});
  auto c = (*hybrid)->RenderChat(lone, J::object());
  ASSERT_TRUE(c);
  EXPECT_EQ((*hybrid)->SharedChatBeginning(lone, J::object(), c->ids), 0);
}

// The tool-call syntax of a loaded model: --tool-call-syntax, else the catalog entry the folder
// was pulled as (here: a lock file naming its repository), else guessed from the template with
// one log line; the choice and its source are in Describe(), and a request with tools on a
// model whose syntax is none is refused with what to do.
TEST(LoadedModel, ToolCallSyntaxComesFromTheOptionThenTheCatalogThenTheTemplate) {
  test::TempDir tmp;
  const std::string dir = tmp.File("m");
  ASSERT_TRUE(WriteSyntheticModel(dir, TinyChatSpec(ModelFamily::kQwen3, 2)).ok());
  // A template that renders tools and teaches Hermes-style calls.
  nlohmann::json config = nlohmann::json::parse(test::ReadFile(dir + "/tokenizer_config.json"));
  config["chat_template"] =
      "{% for m in messages %}{{ m.content }}{% endfor %}{% if tools %}{{ tools | tojson }} "
      "<tool_call>{\"name\": ...}</tool_call>{% endif %}";
  test::WriteFile(dir + "/tokenizer_config.json", config.dump());
  const ToolCallSyntax markers = ToolCallSyntax::kHermes;
  // A catalog chat entry that declares something else than the markers say.
  auto catalog = BuiltinCatalog();
  ASSERT_TRUE(catalog);
  const CatalogEntry* entry = nullptr;
  for (const CatalogEntry& e : (*catalog)->entries()) {
    if (e.tool_call_syntax && *e.tool_call_syntax != markers) entry = &e;
  }
  ASSERT_NE(entry, nullptr) << "no catalog entry declares a syntax other than hermes";

  std::vector<std::string> log;
  auto open = [&](std::optional<ToolCallSyntax> option) {
    log.clear();
    ModelLoadOptions o;
    o.parallel = 1;
    o.package_cache = false;
    o.tool_call_syntax = option;
    auto m = LoadedModel::Open(dir, o, [&](const std::string& line) { log.push_back(line); });
    EXPECT_TRUE(m) << m.status().message();
    return m ? std::move(*m) : nullptr;
  };
  auto lines_with = [&](const std::string& needle) {
    return std::count_if(log.begin(), log.end(),
                         [&](const std::string& l) { return l.find(needle) != std::string::npos; });
  };

  auto guessed = open(std::nullopt);
  ASSERT_TRUE(guessed);
  EXPECT_EQ(guessed->tool_call_syntax().syntax, markers);
  EXPECT_EQ(guessed->tool_call_syntax().source, ToolCallSyntaxSource::kTemplate);
  EXPECT_EQ(lines_with("guessed from the chat template"), 1);
  EXPECT_NE(guessed->Describe().find(guessed->tool_call_syntax().Describe()), std::string::npos);
  auto guessed_tools = guessed->ToolCallSyntaxForTools("m");
  ASSERT_TRUE(guessed_tools) << guessed_tools.status().message();
  EXPECT_EQ(*guessed_tools, markers);

  ASSERT_TRUE(WriteLockFile(dir, LockFile{entry->repo, "main", std::string(40, 'a'), {}}).ok());
  auto declared = open(std::nullopt);
  ASSERT_TRUE(declared);
  EXPECT_EQ(declared->tool_call_syntax().syntax, *entry->tool_call_syntax);
  EXPECT_EQ(declared->tool_call_syntax().source, ToolCallSyntaxSource::kCatalog);
  EXPECT_EQ(lines_with("guessed from the chat template"), 0);
  EXPECT_EQ(lines_with(ToolCallSyntaxName(markers)), 1);  // the markers disagree: said once
  auto usable = declared->ToolCallSyntaxForTools("m");
  if (*entry->tool_call_syntax == ToolCallSyntax::kNone) {
    ASSERT_FALSE(usable);
    EXPECT_EQ(usable.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(usable.status().message().find("'m'"), std::string::npos);
    EXPECT_NE(usable.status().message().find("--tool-call-syntax"), std::string::npos);
  }

  auto flagged = open(ToolCallSyntax::kQwen3Xml);
  ASSERT_TRUE(flagged);
  EXPECT_EQ(flagged->tool_call_syntax().syntax, ToolCallSyntax::kQwen3Xml);
  EXPECT_EQ(flagged->tool_call_syntax().source, ToolCallSyntaxSource::kOption);
  auto flagged_tools = flagged->ToolCallSyntaxForTools("m");
  ASSERT_TRUE(flagged_tools) << flagged_tools.status().message();
  EXPECT_EQ(*flagged_tools, ToolCallSyntax::kQwen3Xml);
}

}  // namespace
}  // namespace tessera
