// Task jobs (embeddings, rerank, classification, moderation) against an independent double
// precision forward (tests/engine/naive_forward.h): each answer must be the arithmetic the
// task defines, computed from that forward's hidden states and logits, not from the engine's.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>

#include "format/model_kind.h"
#include "model/synthetic_checkpoint.h"
#include "model/tensor_convert.h"
#include "naive_forward.h"
#include "runtime/loaded_model.h"
#include "runtime/task_prompts.h"
#include "server/decision_format.h"
#include "test_support.h"
#include "worker/decision_job.h"
#include "worker/systemone_job.h"
#include "worker/task_job.h"

namespace tessera::worker {
namespace {

SyntheticModelSpec TinyQwen3() {
  SyntheticModelSpec s;
  s.family = ModelFamily::kQwen3;
  s.hidden = 64;
  s.intermediate = 96;
  s.layers = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.vocab = 4352;
  s.max_position = 512;
  return s;
}

struct Served {
  std::string dir;
  std::unique_ptr<LoadedModel> model;
  ModelKindInfo kind;
};

Served Open(const std::string& dir, ModelKind declared, const std::string& placement,
            WeightFormat weights = WeightFormat::kAuto) {
  Served s;
  s.dir = dir;
  ModelLoadOptions o;
  o.placement = placement;
  o.weights = weights;
  o.parallel = 4;
  o.package_cache = false;
  o.kv_cache = KvCacheType::kF32;
  auto m = LoadedModel::Open(dir, o);
  EXPECT_TRUE(m) << m.status().message();
  if (m) s.model = std::move(*m);
  auto info = DetectModelKind(dir);
  EXPECT_TRUE(info) << info.status().message();
  if (info) s.kind = *info;
  s.kind.kind = declared;
  return s;
}

// Starts a job (`start` gets its end callback and returns the job or its refusal), then steps
// the model's scheduler until the job has ended; the refusal, if it was refused.
template <class Start>
std::optional<JobFailure> StepUntilEnded(Served& s, Start start) {
  bool ended = false;
  auto job = start([&](uint64_t) { ended = true; });
  if (auto* f = std::get_if<JobFailure>(&job)) return *f;
  for (int i = 0; i < 10000 && !ended; ++i) {
    Status st = s.model->scheduler().Step();
    EXPECT_TRUE(st.ok()) << st.message();
    if (!ended) std::get<0>(job)->AfterStep();  // as the worker does after each step
  }
  EXPECT_TRUE(ended);
  return std::nullopt;
}

// Runs one task job to its end; the answer or the error frame.
struct Answer {
  std::optional<TaskResultMessage> result;
  std::optional<JobErrorMessage> error;
  std::optional<JobFailure> refused;
};

template <typename Payload>
Answer RunTask(Served& s, const Payload& payload, const CacheScope& scope = {}) {
  Answer a;
  auto send = [&](const std::string& frame) {
    auto type = PeekMessageType(frame);
    if (type && *type == MessageType::kTaskResult) a.result = *Decode<TaskResultMessage>(frame);
    if (type && *type == MessageType::kJobError) a.error = *Decode<JobErrorMessage>(frame);
  };
  a.refused = StepUntilEnded(s, [&](TaskJob::EndFn on_end) {
    TaskRequest request = TaskRequest::Of(payload);
    request.cache_scope = scope;
    return TaskJob::Start(1, request, *s.model, s.kind, send, on_end);
  });
  return a;
}

class TaskJobTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    SyntheticModelSpec embed = TinyQwen3();
    embed.sentence_transformers = true;
    ASSERT_TRUE(WriteSyntheticModel(dir_->File("embed"), embed).ok());
    SyntheticModelSpec cls = TinyQwen3();
    cls.class_labels = {"negative", "neutral", "positive"};
    cls.seed = 5;
    ASSERT_TRUE(WriteSyntheticModel(dir_->File("cls"), cls).ok());
    SyntheticModelSpec chat = TinyQwen3();
    chat.seed = 9;
    ASSERT_TRUE(WriteSyntheticModel(dir_->File("chat"), chat).ok());
    // A tiny Qwen3.5 (Gated DeltaNet + gated attention), as decider-0.8b is.
    SyntheticModelSpec hybrid = TinyQwen3();
    hybrid.family = ModelFamily::kQwen3_5;
    hybrid.layers = 4;
    hybrid.full_attention_interval = 2;
    hybrid.seed = 13;
    ASSERT_TRUE(WriteSyntheticModel(dir_->File("hybrid"), hybrid).ok());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static test::TempDir* dir_;
};
test::TempDir* TaskJobTest::dir_ = nullptr;

// The summed log-probability of `option`'s tokens after `prompt`, teacher-forced through the
// naive double forward.
double NaiveOptionLogProb(const Checkpoint& ckpt, const std::vector<int32_t>& prompt,
                          const std::vector<int32_t>& option) {
  std::vector<int32_t> ids = prompt;
  ids.insert(ids.end(), option.begin(), option.end());
  const auto logits = test::NaiveForward(ckpt, ids);
  double sum = 0;
  for (size_t k = 0; k < option.size(); ++k) {
    const auto& row = logits[prompt.size() - 1 + k];
    double max = row[0], z = 0;
    for (double v : row) max = std::max(max, v);
    for (double v : row) z += std::exp(v - max);
    sum += row[static_cast<size_t>(option[k])] - max - std::log(z);
  }
  return sum;
}

std::vector<double> Normalised(std::vector<double> v, size_t dims) {
  v.resize(dims);
  double sum = 0;
  for (double x : v) sum += x * x;
  for (double& x : v) x /= std::sqrt(sum);
  return v;
}

TEST_F(TaskJobTest, EmbeddingIsTheNormalisedFinalHiddenStateOfTheLastToken) {
  Served s = Open(dir_->File("embed"), ModelKind::kEmbed, "reference");
  ASSERT_TRUE(s.model);
  ASSERT_TRUE(s.kind.normalize);
  ASSERT_EQ(s.kind.prompts.count("query"), 1u);
  EmbedPayload r;
  r.inputs.texts = {"The river moved slowly past the old mill.", "bread"};
  for (int32_t dims : {0, 32}) {
    for (const std::string prompt_name : {"", "query"}) {
      r.dimensions = dims;
      r.prompt_name = prompt_name;
      Answer a = RunTask(s, r);
      ASSERT_TRUE(a.result) << (a.refused ? a.refused->message : "no result");
      ASSERT_EQ(a.result->items.size(), 2u);
      for (size_t i = 0; i < 2; ++i) {
        const std::string prompt = prompt_name.empty() ? "" : s.kind.prompts["query"];
        auto ids = EmbeddingIds(*s.model, r.inputs.texts[i], prompt);
        ASSERT_TRUE(ids);
        EXPECT_EQ(ids->back(), *EndOfTextId(*s.model));
        EXPECT_EQ(a.result->items[i].tokens, static_cast<int64_t>(ids->size()));
        const auto hidden = test::NaiveFinalHidden(s.model->checkpoint(), *ids);
        const size_t width = dims > 0 ? static_cast<size_t>(dims) : hidden.back().size();
        const std::vector<double> want = Normalised(hidden.back(), width);
        const std::vector<float>& got = a.result->items[i].values;
        ASSERT_EQ(got.size(), width);
        double norm = 0;
        for (size_t k = 0; k < width; ++k) {
          EXPECT_NEAR(got[k], want[k], 2e-5) << "input " << i << " dim " << k;
          norm += static_cast<double>(got[k]) * got[k];
        }
        EXPECT_NEAR(norm, 1.0, 1e-5);
      }
    }
  }
}

TEST_F(TaskJobTest, BatchedEmbeddingsAreIdenticalToOneByOne) {
  // Short prompts share cpu blocks (several sequences' rows in one matmul); long ones do not.
  std::string long_text;
  for (int i = 0; i < 30; ++i) long_text += "the boat waited by the stone steps ";
  struct Case {
    const char* model;
    const char* placement;
    WeightFormat weights;
  };
  const Case cases[] = {{"embed", "reference", WeightFormat::kAuto},
                        {"embed", "cpu", WeightFormat::kAuto},
                        {"embed", "cpu", WeightFormat::kInt8},
                        {"embed", "cpu", WeightFormat::kBF16},
                        {"hybrid", "cpu", WeightFormat::kInt8}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.model) + " " + c.placement + " " +
                 std::to_string(static_cast<int>(c.weights)));
    Served s = Open(dir_->File(c.model), ModelKind::kEmbed, c.placement, c.weights);
    ASSERT_TRUE(s.model);
    EmbedPayload batch;
    batch.inputs.texts = {"a",
                          "the boat waited by the stone steps",
                          long_text,
                          "bread and coins",
                          "x y z",
                          "Numbers such as 1, 2, 3",
                          long_text + " and more"};
    Answer together = RunTask(s, batch);
    ASSERT_TRUE(together.result) << (together.refused ? together.refused->message : "");
    for (size_t i = 0; i < batch.inputs.texts.size(); ++i) {
      EmbedPayload one = batch;
      one.inputs.texts = {batch.inputs.texts[i]};
      Served fresh = Open(dir_->File(c.model), ModelKind::kEmbed, c.placement, c.weights);
      Answer alone = RunTask(fresh, one);
      // Again on the model that ran the batch: its prefix cache holds this input.
      Answer cached = RunTask(s, one);
      ASSERT_TRUE(cached.result);
      EXPECT_EQ(cached.result->items[0].values, together.result->items[i].values)
          << "input " << i << " with its prefix cached";
      ASSERT_TRUE(alone.result);
      EXPECT_EQ(alone.result->items[0].values, together.result->items[i].values) << "input " << i;
    }
  }
}

TEST_F(TaskJobTest, RerankScoreIsTheSoftmaxOfYesAgainstNo) {
  Served s = Open(dir_->File("chat"), ModelKind::kRerank, "reference");
  ASSERT_TRUE(s.model);
  RerankPayload r;
  r.query = "where is the mill?";
  r.documents.texts = {"The mill stood by the river.", "Apples were sorted.", ""};
  Answer a = RunTask(s, r);
  ASSERT_TRUE(a.result) << (a.refused ? a.refused->message : "no result");
  auto yes_no = RerankAnswerIds(*s.model);
  ASSERT_TRUE(yes_no) << yes_no.status().message();
  for (size_t i = 0; i < r.documents.texts.size(); ++i) {
    auto ids = RerankIds(*s.model, r.query, r.documents.texts[i], "");
    ASSERT_TRUE(ids);
    const auto logits = test::NaiveForward(s.model->checkpoint(), *ids).back();
    const double yes = logits[static_cast<size_t>(yes_no->yes)];
    const double no = logits[static_cast<size_t>(yes_no->no)];
    const double want = std::exp(yes) / (std::exp(yes) + std::exp(no));
    ASSERT_EQ(a.result->items[i].values.size(), 1u);
    EXPECT_NEAR(a.result->items[i].values[0], want, 1e-5) << "document " << i;
  }
}

TEST_F(TaskJobTest, ClassProbabilitiesAreTheSoftmaxOfTheScoreHead) {
  Served s = Open(dir_->File("cls"), ModelKind::kClassify, "reference");
  ASSERT_TRUE(s.model);
  ASSERT_EQ(s.kind.labels.size(), 3u);
  std::vector<float> score;
  ASSERT_TRUE(WidenToF32(s.model->checkpoint().tensors.score, &score).ok());
  ClassifyPayload r;
  r.inputs.texts = {"what a fine morning", "the dog barked at every stranger"};
  for (bool activation : {true, false}) {
    r.use_activation = activation;
    Answer a = RunTask(s, r);
    ASSERT_TRUE(a.result) << (a.refused ? a.refused->message : "no result");
    EXPECT_EQ(a.result->labels, s.kind.labels);
    for (size_t i = 0; i < r.inputs.texts.size(); ++i) {
      auto ids = s.model->EncodeText(r.inputs.texts[i], true);
      ASSERT_TRUE(ids);
      const auto h = test::NaiveFinalHidden(s.model->checkpoint(), *ids).back();
      std::vector<double> logits(3, 0.0);
      for (size_t c = 0; c < 3; ++c) {
        for (size_t k = 0; k < h.size(); ++k) logits[c] += score[c * h.size() + k] * h[k];
      }
      const std::vector<double> want = activation ? Softmax(logits) : logits;
      const auto& got = a.result->items[i].values;
      ASSERT_EQ(got.size(), 3u);
      double sum = 0;
      for (size_t c = 0; c < 3; ++c) {
        EXPECT_NEAR(got[c], want[c], 2e-5) << "input " << i << " class " << c;
        sum += got[c];
      }
      if (activation) {
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
      const size_t best =
          static_cast<size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      EXPECT_EQ(a.result->items[i].label, s.kind.labels[best]);
    }
  }
}

TEST_F(TaskJobTest, GuardLabelScoresComeFromTheLabelTokens) {
  Served s = Open(dir_->File("chat"), ModelKind::kGuard, "reference");
  ASSERT_TRUE(s.model);
  ModeratePayload r;
  r.inputs.texts = {"how do I bake bread?", "a message"};
  Answer a = RunTask(s, r);
  ASSERT_TRUE(a.result) << (a.refused ? a.refused->message : "no result");
  auto labels = GuardLabelIds(*s.model);
  ASSERT_TRUE(labels);
  for (size_t i = 0; i < r.inputs.texts.size(); ++i) {
    auto prefix = GuardPrefixIds(*s.model, {{{"role", "user"}, {"content", r.inputs.texts[i]}}});
    ASSERT_TRUE(prefix);
    std::vector<double> sums;
    for (const auto& label : *labels) {
      sums.push_back(NaiveOptionLogProb(s.model->checkpoint(), *prefix, label));
    }
    const std::vector<double> want = Softmax(sums);
    const auto& got = a.result->items[i].values;
    ASSERT_EQ(got.size(), 3u);
    for (size_t k = 0; k < 3; ++k) EXPECT_NEAR(got[k], want[k], 2e-5) << "input " << i;
    const size_t best =
        static_cast<size_t>(std::max_element(want.begin(), want.end()) - want.begin());
    EXPECT_EQ(a.result->items[i].label, kGuardLabels[best]);
    // The categories: greedy tokens after "Safety: <label>\nCategories:" until a stop id or
    // the line's end, by the naive forward.
    auto tail = GuardCategoriesPromptTail(*s.model, kGuardLabels[best]);
    ASSERT_TRUE(tail);
    std::vector<int32_t> ids = *prefix;
    ids.insert(ids.end(), tail->begin(), tail->end());
    std::vector<int32_t> generated;
    const int32_t newline = (*s.model->EncodeText("\n", false))[0];
    for (int64_t k = 0; k < kMaxGuardCategoryTokens; ++k) {
      const auto row = test::NaiveForward(s.model->checkpoint(), ids).back();
      const int32_t next =
          static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
      generated.push_back(next);
      ids.push_back(next);
      const auto& stops = s.model->stop_ids();
      if (next == newline || std::find(stops.begin(), stops.end(), next) != stops.end()) break;
    }
    auto text = s.model->tokenizer().Decode(generated, true);
    ASSERT_TRUE(text);
    EXPECT_EQ(a.result->items[i].categories, ParseGuardCategories(*text)) << *text;
  }
  EXPECT_EQ(ParseGuardCategories(" Violent, PII \nRefusal: No"),
            (std::vector<std::string>{"Violent", "PII"}));
  EXPECT_TRUE(ParseGuardCategories(" None\n").empty());
  EXPECT_TRUE(ParseGuardCategories("").empty());
}

TEST_F(TaskJobTest, InvalidInputsAreRefusedNamingTheField) {
  Served s = Open(dir_->File("embed"), ModelKind::kEmbed, "reference");
  ASSERT_TRUE(s.model);
  EmbedPayload r;
  r.inputs.texts = {"short", std::string(3000, 'q') + " end"};
  r.inputs.max_input_tokens = 64;
  Answer a = RunTask(s, r);
  ASSERT_TRUE(a.refused);
  EXPECT_EQ(a.refused->kind, JobErrorKind::kInvalidRequest);
  EXPECT_NE(a.refused->message.find("input[1]"), std::string::npos) << a.refused->message;
  EXPECT_NE(a.refused->message.find("limit of 64"), std::string::npos) << a.refused->message;
  r.inputs.texts = {"x"};
  r.dimensions = 128;  // more than the model's 64
  a = RunTask(s, r);
  ASSERT_TRUE(a.refused);
  EXPECT_NE(a.refused->message.find("dimensions"), std::string::npos);
  r.dimensions = 0;
  r.prompt_name = "nonsense";
  a = RunTask(s, r);
  ASSERT_TRUE(a.refused);
  EXPECT_NE(a.refused->message.find("prompt_name"), std::string::npos);
  r.prompt_name = "";
  r.inputs.texts = {};
  r.inputs.ids = {{1, 2, 99999}};
  a = RunTask(s, r);
  ASSERT_TRUE(a.refused);
  EXPECT_NE(a.refused->message.find("input[0]"), std::string::npos) << a.refused->message;
  Served c = Open(dir_->File("chat"), ModelKind::kChat, "reference");
  ASSERT_TRUE(c.model);
  ClassifyPayload cls;
  cls.inputs.texts = {"x"};
  a = RunTask(c, cls);
  ASSERT_TRUE(a.refused);  // no score head
  EXPECT_NE(a.refused->message.find("classification head"), std::string::npos);
}

// A task job started by hand (the test turns it), with what it sent and whether it ended.
struct HandJob {
  std::unique_ptr<TaskJob> job;
  std::optional<TaskResultMessage> result;
  std::optional<JobErrorMessage> error;
  std::optional<DoneMessage> done;
  bool ended = false;
};

template <typename Payload>
std::unique_ptr<HandJob> StartByHand(Served& s, const Payload& payload) {
  auto h = std::make_unique<HandJob>();
  HandJob* out = h.get();
  auto started = TaskJob::Start(
      1, TaskRequest::Of(payload), *s.model, s.kind,
      [out](const std::string& frame) {
        auto type = PeekMessageType(frame);
        if (type && *type == MessageType::kTaskResult)
          out->result = *Decode<TaskResultMessage>(frame);
        if (type && *type == MessageType::kJobError) out->error = *Decode<JobErrorMessage>(frame);
        if (type && *type == MessageType::kDone) out->done = *Decode<DoneMessage>(frame);
      },
      [out](uint64_t) { out->ended = true; });
  EXPECT_TRUE(std::holds_alternative<std::unique_ptr<TaskJob>>(started));
  if (auto* job = std::get_if<std::unique_ptr<TaskJob>>(&started)) h->job = std::move(*job);
  return h;
}

// A big task job in blocks: Start builds only the first kTaskInputsPerTurn prompts and submits
// nothing; the rest are built a block per turn and nothing runs before all are checked; then
// the job never has more than the model's slots less one in the scheduler; its answer is every
// input's, in order, equal to each input run alone.
TEST_F(TaskJobTest, ABigJobIsBuiltAndSubmittedInBlocks) {
  Served s = Open(dir_->File("embed"), ModelKind::kEmbed, "reference");
  ASSERT_TRUE(s.model);
  EmbedPayload r;
  for (int i = 0; i < 3 * static_cast<int>(kTaskInputsPerTurn) + 5; ++i) {
    r.inputs.texts.push_back("input number " + std::to_string(i) + " about a mill");
  }
  auto h = StartByHand(s, r);
  ASSERT_TRUE(h->job);
  TaskJob& job = *h->job;
  const bool& ended = h->ended;
  Scheduler& sched = s.model->scheduler();
  EXPECT_FALSE(sched.HasWork());
  EXPECT_TRUE(job.HasPendingWork());
  int turns_before_submitting = 0;
  for (; !sched.HasWork() && turns_before_submitting < 10; ++turns_before_submitting) {
    job.AfterStep();
  }
  // Start built the first block; each turn one more, the last turn submits too.
  const size_t blocks = (r.inputs.texts.size() + kTaskInputsPerTurn - 1) / kTaskInputsPerTurn;
  EXPECT_EQ(turns_before_submitting, static_cast<int>(blocks) - 1);
  for (int i = 0; i < 10000 && !ended; ++i) {
    EXPECT_LE(sched.running() + sched.waiting(), s.model->slots() - 1);  // one slot stays free
    ASSERT_TRUE(sched.Step().ok());
    if (!ended) job.AfterStep();
  }
  ASSERT_TRUE(ended);
  const std::optional<TaskResultMessage>& result = h->result;
  ASSERT_TRUE(result);
  ASSERT_EQ(result->items.size(), r.inputs.texts.size());
  for (size_t i = 0; i < r.inputs.texts.size(); i += 13) {
    EmbedPayload one;
    one.inputs.texts = {r.inputs.texts[i]};
    Answer alone = RunTask(s, one);
    ASSERT_TRUE(alone.result);
    EXPECT_EQ(result->items[i].index, static_cast<int32_t>(i));
    EXPECT_EQ(result->items[i].values, alone.result->items[0].values) << "input " << i;
  }
}

// An input over its limit in a later block: the job answers a JobError naming it, and nothing
// was submitted.
TEST_F(TaskJobTest, AnInvalidInputInALaterBlockIsRefusedBeforeAnythingRuns) {
  Served s = Open(dir_->File("embed"), ModelKind::kEmbed, "reference");
  ASSERT_TRUE(s.model);
  EmbedPayload r;
  r.inputs.max_input_tokens = 64;
  for (size_t i = 0; i < 2 * kTaskInputsPerTurn; ++i) r.inputs.texts.push_back("fine");
  const size_t bad = kTaskInputsPerTurn + 3;
  r.inputs.texts[bad] = std::string(3000, 'q');
  auto h = StartByHand(s, r);
  ASSERT_TRUE(h->job);
  for (int i = 0; i < 10 && !h->ended; ++i) {
    h->job->AfterStep();
    EXPECT_FALSE(s.model->scheduler().HasWork());
  }
  ASSERT_TRUE(h->ended);
  ASSERT_TRUE(h->error);
  EXPECT_EQ(h->error->kind, JobErrorKind::kInvalidRequest);
  EXPECT_EQ(h->error->field, "input[" + std::to_string(bad) + "]");
}

// A Cancel stops a big job at its next step: while it builds prompts (nothing ran) and while
// it runs (no more is submitted; what is in the scheduler ends at the next step). Either way
// the job answers a cancelled Done and leaves nothing in the scheduler.
TEST_F(TaskJobTest, ACancelEndsABigJobAtTheNextStep) {
  Served s = Open(dir_->File("chat"), ModelKind::kRerank, "reference");
  ASSERT_TRUE(s.model);
  RerankPayload r;
  r.query = "where is the mill?";
  for (int i = 0; i < 200; ++i) r.documents.texts.push_back("document " + std::to_string(i));
  const int building_turns = static_cast<int>((200 - 1) / kTaskInputsPerTurn);
  for (int cancel_after_turns : {1, building_turns + 5}) {
    auto h = StartByHand(s, r);
    ASSERT_TRUE(h->job);
    TaskJob& job = *h->job;
    const bool& ended = h->ended;
    const std::optional<DoneMessage>& done = h->done;
    Scheduler& sched = s.model->scheduler();
    for (int turn = 0; turn < cancel_after_turns; ++turn) {
      ASSERT_TRUE(sched.Step().ok());
      job.AfterStep();
    }
    EXPECT_EQ(sched.HasWork(), cancel_after_turns > 1) << cancel_after_turns;
    job.Cancel();
    ASSERT_TRUE(sched.Step().ok());
    if (!ended) job.AfterStep();
    EXPECT_TRUE(ended) << cancel_after_turns;
    ASSERT_TRUE(done) << cancel_after_turns;
    EXPECT_EQ(done->finish_reason, FinishReason::kCancelled);
    EXPECT_FALSE(sched.HasWork());
    EXPECT_FALSE(job.HasPendingWork());
  }
}

// What a decision job sent: its Started, one Delta and Done (or a refusal / error).
struct Decided {
  std::optional<StartedMessage> started;
  std::optional<DeltaMessage> delta;
  std::optional<DoneMessage> done;
  std::optional<JobErrorMessage> error;
  std::optional<JobFailure> refused;
};

Decided Decide(Served& s, const ChatPayload& request, size_t max_options = kMaxDecisionOptions) {
  Decided d;
  auto send = [&](const std::string& frame) {
    switch (*PeekMessageType(frame)) {
      case MessageType::kStarted:
        d.started = *Decode<StartedMessage>(frame);
        break;
      case MessageType::kDelta:
        EXPECT_FALSE(d.delta) << "one delta";
        d.delta = *Decode<DeltaMessage>(frame);
        break;
      case MessageType::kDone:
        d.done = *Decode<DoneMessage>(frame);
        break;
      case MessageType::kJobError:
        d.error = *Decode<JobErrorMessage>(frame);
        break;
      default:
        ADD_FAILURE() << "unexpected frame";
    }
  };
  d.refused = StepUntilEnded(s, [&](DecisionJob::EndFn on_end) {
    return DecisionJob::Start(1, request, {}, *s.model, max_options, 0, send, on_end);
  });
  return d;
}

// A chat asking for `schema`, recognised as a decision as the HTTP side does it.
ChatPayload DecisionRequest(const std::string& schema, const std::string& description = "") {
  ChatPayload r;
  r.messages = {{"user", "Is fresh bread better than old bread?", "", "", ""}};
  nlohmann::ordered_json js = {{"name", "d"}, {"schema", nlohmann::ordered_json::parse(schema)}};
  if (!description.empty()) js["description"] = description;
  auto decision =
      server::DecisionFormat(nlohmann::ordered_json{{"type", "json_schema"}, {"json_schema", js}});
  EXPECT_TRUE(decision) << "not a decision: " << schema;
  if (decision) r.options.response_format = *decision;
  r.options.logprobs = true;
  r.options.sampling.temperature = 1.3;  // accepted and ignored
  return r;
}

TEST_F(TaskJobTest, DecisionProbabilitiesAreTheSoftmaxOfTheOptionsSummedLogProbabilities) {
  for (const char* name : {"chat", "hybrid"}) {
    SCOPED_TRACE(name);
    Served s = Open(dir_->File(name), ModelKind::kChat, "reference");
    ASSERT_TRUE(s.model);
    struct Case {
      std::string schema;
      std::string property;
    };
    const Case cases[] = {
        {R"({"enum": ["yes", "no"]})", ""},  // one token each: one row scores both
        {R"({"oneOf": [{"const": "Safe", "description": "nothing wrong"},
                     {"const": "Unsafe Controversial"}, {"const": "maybe not"}]})",
         ""},
        {R"({"type": "object", "properties": {"answer": {"type": "boolean"}},
           "required": ["answer"], "additionalProperties": false})",
         "answer"},
        {R"({"enum": [1, 2, 3, 10, 25]})", ""},
    };
    for (const Case& c : cases) {
      ChatPayload r = DecisionRequest(c.schema, "Which is it?");
      const ResponseFormat* schema = &r.options.response_format;
      ASSERT_EQ(schema->kind, ResponseFormatKind::kDecision) << c.schema;
      EXPECT_EQ(schema->property, c.property);
      EXPECT_EQ(schema->question, "Which is it?");
      Decided d = Decide(s, r);
      ASSERT_TRUE(d.started && d.delta && d.done) << (d.refused ? d.refused->message : c.schema);
      auto prompt = DecisionPrompt(*s.model, r.messages, *schema);
      ASSERT_TRUE(prompt);
      EXPECT_EQ(d.started->prompt_tokens, static_cast<int64_t>(prompt->size()));
      // Independent: each option's tokens teacher-forced through the naive double forward.
      std::vector<double> sums;
      for (const DecisionOption& option_text : schema->options) {
        auto option = s.model->EncodeText(option_text.text, false);
        ASSERT_TRUE(option);
        sums.push_back(NaiveOptionLogProb(s.model->checkpoint(), *prompt, *option));
      }
      const std::vector<double> want = Softmax(sums);
      const size_t best =
          static_cast<size_t>(std::max_element(want.begin(), want.end()) - want.begin());
      ASSERT_EQ(d.delta->logprobs.size(), 1u);
      const TokenLogprobEntry& entry = d.delta->logprobs[0];
      EXPECT_EQ(entry.token, schema->options[best].text);
      ASSERT_EQ(entry.top.size(), schema->options.size());  // every option
      double total = 0;
      for (const TopLogprob& t : entry.top) {
        size_t k = 0;
        while (k < schema->options.size() && schema->options[k].text != t.token) ++k;
        ASSERT_LT(k, schema->options.size()) << t.token;
        EXPECT_NEAR(std::exp(t.logprob), want[k], 2e-5) << c.schema << " option " << t.token;
        total += std::exp(t.logprob);
      }
      EXPECT_NEAR(total, 1.0, 1e-5);
      const auto value = nlohmann::ordered_json::parse(schema->options[best].value);
      const std::string content =
          c.property.empty() ? value.dump() : nlohmann::ordered_json{{c.property, value}}.dump();
      EXPECT_EQ(d.delta->text, content);
      EXPECT_EQ(d.done->finish_reason, FinishReason::kStop);
    }
  }
}

TEST_F(TaskJobTest, DecisionRefusals) {
  Served s = Open(dir_->File("chat"), ModelKind::kChat, "reference");
  ASSERT_TRUE(s.model);
  ChatPayload r = DecisionRequest(R"({"enum": ["a", "b", "c"]})");
  r.options.n = 2;
  Decided d = Decide(s, r);
  ASSERT_TRUE(d.refused);
  EXPECT_EQ(d.refused->message.rfind("n: ", 0), 0u) << d.refused->message;
  nlohmann::ordered_json many = nlohmann::ordered_json::array();
  for (int i = 0; i < 11; ++i) many.push_back("option " + std::to_string(i));
  r = DecisionRequest(nlohmann::ordered_json{{"enum", many}}.dump());
  d = Decide(s, r);
  ASSERT_TRUE(d.refused);
  EXPECT_NE(d.refused->message.find("2 to 10 options, found 11"), std::string::npos);
  d = Decide(s, r, kMaxDeclaredDecisionOptions);  // a model served as decide takes 255
  EXPECT_TRUE(d.delta) << (d.refused ? d.refused->message : "");
  r = DecisionRequest(R"({"enum": ["a", "a"]})");
  d = Decide(s, r);
  ASSERT_TRUE(d.refused);
  EXPECT_NE(d.refused->message.find("twice"), std::string::npos);
  r = DecisionRequest(R"({"enum": ["a", "b"]})");
  r.messages = {{"user", std::string(20000, 'z'), "", "", ""}};
  d = Decide(s, r);
  ASSERT_TRUE(d.refused);
  EXPECT_EQ(d.refused->kind, JobErrorKind::kContextLength);
}

Answer AskSystemOne(Served& s, const SystemOnePayload& request, int resume, size_t entries = 6,
                    const CacheScope& scope = {}) {
  Answer a;
  auto send = [&](const std::string& frame) {
    auto type = PeekMessageType(frame);
    if (type && *type == MessageType::kTaskResult) a.result = *Decode<TaskResultMessage>(frame);
    if (type && *type == MessageType::kJobError) a.error = *Decode<JobErrorMessage>(frame);
  };
  a.refused = StepUntilEnded(s, [&](SystemOneJob::EndFn on_end) {
    return SystemOneJob::Start(1, request, scope, *s.model, {resume, entries}, send, on_end);
  });
  return a;
}

SystemOnePayload SystemOneRequest(const std::string& state) {
  SystemOnePayload r;
  r.state = state;
  // One-token options first: those questions run side by side unless the state is shared.
  r.questions = {
      {QuestionType::kScore, "How urgent?", {"0", "1", "2"}, {"not", "somewhat", "very"}},
      {QuestionType::kNoul, "Is the customer angry?", {"yes", "no"}, {"", ""}},
      {QuestionType::kChoice, "Which team?", {"billing", "tech support"}, {"money", "bugs"}}};
  return r;
}

TEST_F(TaskJobTest, SystemOneIsIdenticalWithResumeOffAndOnAndMatchesTheNaiveForward) {
  const std::string state =
      "{\"ticket\": \"My invoice is wrong and the river mill has not paid the baker for a "
      "week; I am furious and want my bread money back today\", \"customer\": \"ACME\"}";
  for (const char* name : {"chat", "hybrid"}) {
    for (const char* placement : {"reference", "cpu"}) {
      SCOPED_TRACE(std::string(name) + " " + placement);
      std::optional<TaskResultMessage> off;
      for (int resume : {0, 1, 2}) {
        Served s = Open(dir_->File(name), ModelKind::kChat, placement);  // a fresh cache
        ASSERT_TRUE(s.model);
        Answer a = AskSystemOne(s, SystemOneRequest(state), resume);
        ASSERT_TRUE(a.result) << (a.refused ? a.refused->message : "no result");
        ASSERT_EQ(a.result->items.size(), 3u);
        if (resume == 0) {
          off = a.result;  // options of a question share its prompt; questions share nothing
          continue;
        }
        for (size_t q = 0; q < 3; ++q) {
          EXPECT_EQ(a.result->items[q].values, off->items[q].values) << "question " << q;
          EXPECT_EQ(a.result->items[q].label, off->items[q].label);
        }
        // The state was read once: every later question reused its blocks.
        EXPECT_GT(a.result->cached_tokens, off->cached_tokens + 2 * 32) << "resume " << resume;
        EXPECT_EQ(s.model->scheduler().pinned_prefixes(), resume == 2 ? 1u : 0u);
      }
      if (std::string(placement) != "reference") continue;
      // The choice question against the naive double forward.
      Served s = Open(dir_->File(name), ModelKind::kChat, placement);
      const SystemOnePayload r = SystemOneRequest(state);
      auto prompt = SystemOnePrompt(*s.model, state, r.questions[2]);
      ASSERT_TRUE(prompt);
      auto prefix = SystemOneStatePrefix(*s.model, state);
      ASSERT_TRUE(prefix);
      ASSERT_TRUE(std::equal(prefix->begin(), prefix->end(), prompt->begin()));
      std::vector<double> sums;
      for (const std::string& option : r.questions[2].options) {
        auto ids = s.model->EncodeText(option, false);
        sums.push_back(NaiveOptionLogProb(s.model->checkpoint(), *prompt, *ids));
      }
      const std::vector<double> want = Softmax(sums);
      for (size_t k = 0; k < 2; ++k) EXPECT_NEAR(off->items[2].values[k], want[k], 2e-5);
    }
  }
}

TEST_F(TaskJobTest, SystemOnePinsExtendedStatesUpToItsEntries) {
  Served s = Open(dir_->File("chat"), ModelKind::kChat, "cpu");
  ASSERT_TRUE(s.model);
  std::string state = "The boy rowed across the river to the market where his mother sold bread.";
  int64_t cached_before = 0;
  for (int i = 0; i < 4; ++i) {
    Answer a = AskSystemOne(s, SystemOneRequest(state), 2, /*entries=*/2);
    ASSERT_TRUE(a.result);
    if (i > 0) {
      EXPECT_GT(a.result->cached_tokens, cached_before);  // the earlier state is reused
    }
    cached_before = a.result->cached_tokens;
    EXPECT_LE(s.model->scheduler().pinned_prefixes(), 2u);
    state += " Then it rained.";  // extends the state
  }
  EXPECT_GE(s.model->scheduler().pinned_prefixes(), 1u);
}

// The job's cache scope reaches its sequences: System One's pinned states and an embedding's
// cached prompt are reused under the scope that computed them, never under another.
TEST_F(TaskJobTest, CachedPromptsAndPinnedStatesStayInTheirScope) {
  const CacheScope alice{"alice", ""}, bob{"bob", ""};
  Served s = Open(dir_->File("chat"), ModelKind::kChat, "cpu");
  ASSERT_TRUE(s.model);
  const std::string state =
      "The boy rowed across the river to the market where his mother sold bread, and the miller "
      "waved to him from the bridge while the baker counted the loaves for the evening.";
  Answer first = AskSystemOne(s, SystemOneRequest(state), 2, 6, alice);
  Answer probe = AskSystemOne(s, SystemOneRequest(state), 2, 6, bob);
  Answer again = AskSystemOne(s, SystemOneRequest(state), 2, 6, alice);
  ASSERT_TRUE(first.result && probe.result && again.result);
  // Bob reuses only what his own request computed (the state once for its questions), exactly
  // as alice's first request did on an empty cache; alice's repeat reuses her pinned state.
  EXPECT_EQ(probe.result->cached_tokens, first.result->cached_tokens);
  EXPECT_GT(again.result->cached_tokens, first.result->cached_tokens);
  EXPECT_EQ(probe.result->items[0].values, first.result->items[0].values);

  Served e = Open(dir_->File("embed"), ModelKind::kEmbed, "cpu");
  ASSERT_TRUE(e.model);
  EmbedPayload embed;
  embed.inputs.texts = {state + " " + state};
  Answer a1 = RunTask(e, embed, alice);
  Answer b1 = RunTask(e, embed, bob);
  Answer a2 = RunTask(e, embed, alice);
  ASSERT_TRUE(a1.result && b1.result && a2.result);
  EXPECT_EQ(a1.result->cached_tokens, 0);
  EXPECT_EQ(b1.result->cached_tokens, 0);
  EXPECT_GT(a2.result->cached_tokens, 32);
  EXPECT_EQ(a2.result->items[0].values, b1.result->items[0].values);
}

}  // namespace
}  // namespace tessera::worker
