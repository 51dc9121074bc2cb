// The messages between the HTTP process and its inference worker, and how they travel over a
// stream socket. Each frame is a 4-byte little-endian payload length followed by the payload;
// the payload's first byte is the MessageType and the rest are the message's fields in a fixed
// order: integers little-endian, strings and lists as a u32 count then the elements, optional
// values as a presence byte then the value, a variant as its index byte then the alternative.
// Every read is bounds-checked: a short, oversized or malformed frame is an error, never a
// crash. The HTTP process parses JSON; what crosses is typed (a job's payload is one struct per
// kind), except the documents a chat template renders as the client wrote them (a tool's
// definition, an assistant's tool_calls) and a response_format's JSON Schema.
//
// Each message's fields are listed once (its Describe function in protocol.cc), and that one
// list is both written and read: a new message is a struct with its kType, one Describe, and
// one line in the codec table; a new job kind is a payload struct, its Describe and its place
// in JobPayload.
//
//   JobRequest job{.job_id = 7, .model = "stories", .payload = CompletionPayload{"Once"}};
//   TS_RETURN_IF_ERROR(WriteFrame(fd, Encode(job)));
//   TS_ASSIGN_OR_RETURN(std::string frame, ReadFrame(fd));   // on the worker side
//   TS_ASSIGN_OR_RETURN(JobRequest got, Decode<JobRequest>(frame));
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/status.h"
#include "engine/cache_scope.h"
#include "format/model_kind.h"
#include "sampling/sampling_params.h"

namespace tessera::worker {

inline constexpr uint32_t kMaxFrameBytes = 16u << 20;  // larger than any valid message

enum class MessageType : uint8_t {
  kJobRequest = 1,   // server -> worker
  kCancel = 2,       // server -> worker
  kAddModel = 3,     // server -> worker: a model the server now serves (pulled while running)
  kReady = 10,       // worker -> server: models loaded and warmed, jobs accepted
  kStarted = 11,     // the prompt is tokenized and fits; sampling resolved
  kDelta = 12,       // generated text (maybe empty while a stop string is pending) + logprobs
  kDone = 13,        // the job ended normally
  kJobError = 14,    // the job failed; nothing more follows for it
  kTokens = 15,      // tokenize result
  kText = 16,        // detokenize result
  kTaskResult = 17,  // embeddings, rerank scores, classes, moderation labels
};

// One System One question: its options are scored after the state (worker: SystemOneJob).
enum class QuestionType : uint8_t { kChoice = 1, kScore = 2, kNoul = 3 };
struct Question {
  QuestionType type = QuestionType::kChoice;
  std::string instructions;
  std::vector<std::string> options;       // what is scored ("0".."n-1" for score levels)
  std::vector<std::string> descriptions;  // shown beside each option; "" for none
};

inline constexpr int32_t kMaxChoices = 16;  // n
inline constexpr size_t kMaxLogitBias = 1024;

struct ChatMessage {
  std::string role;
  std::string content;
  // assistant: the OpenAI tool_calls array as the client wrote it, or empty. It stays a JSON
  // document because the chat template renders it as one (key order included).
  std::string tool_calls;
  std::string tool_call_id;  // tool: the call this result answers
  std::string name;          // tool: the function's name, when given
};

// How a reply is shaped (OpenAI response_format), decided once in the HTTP process.
enum class ResponseFormatKind : uint8_t {
  kText = 1,        // free text
  kJsonObject = 2,  // any JSON object
  kJsonSchema = 3,  // JSON following `schema`
  kDecision = 4,    // one of `options`, scored rather than generated (worker: DecisionJob)
};
struct DecisionOption {
  std::string value{};  // the option as JSON: a string, number or boolean
  std::string text{};   // what is scored (and named in logprobs): a string as itself, else `value`
  std::string description{};
};
struct ResponseFormat {
  ResponseFormatKind kind = ResponseFormatKind::kText;
  // kJsonSchema: the JSON Schema as compact JSON (it compiled in the HTTP process; a schema is
  // a document, so it travels as one).
  std::string schema{};
  // kDecision: the options, the property the answer is wrapped in ({property: value}; empty:
  // the bare value), and the question the schema describes.
  std::vector<DecisionOption> options{};
  std::string property{};
  std::string question{};
};

// One entry of a chat request's tools.
struct ToolDefinition {
  std::string name{};   // the function's name
  bool strict = false;  // "strict": true: its arguments must follow its schema
  // The tool object as the client wrote it: the chat template renders it (key order included)
  // and the worker builds the call grammar from its parameters.
  std::string definition{};
};
enum class ToolChoiceMode : uint8_t { kAuto = 1, kNone = 2, kRequired = 3, kFunction = 4 };
struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::kAuto;
  std::string function{};  // kFunction: the function the reply must call
};

// What every generated reply takes (chat and completion).
struct GenerationOptions {
  int64_t max_tokens = -1;          // -1: until the context is full
  std::vector<std::string> stop{};  // stop strings, never part of the output
  SamplingParams sampling{};
  bool logprobs = false;
  int32_t top_logprobs = 0;
  int32_t n = 1;  // choices, sharing the prompt's cache
  // Added to the token's logit before each choice (and before any grammar mask); at most
  // kMaxLogitBias entries of -100..100.
  std::vector<std::pair<int32_t, double>> logit_bias{};
  ResponseFormat response_format{};
};

// The job payloads, one struct per kind: JobRequest::payload holds one of them.
struct ChatPayload {
  std::vector<ChatMessage> messages{};
  std::vector<ToolDefinition> tools{};
  ToolChoice tool_choice{};
  GenerationOptions options{};
  // The chat template's enable_thinking (a model's thinking switch, e.g. Qwen3's); unset: the
  // model's default (LoadedModel::ChatTemplateKwargs). A template without it ignores it.
  std::optional<bool> enable_thinking{};
};
struct CompletionPayload {
  std::string prompt{};
  GenerationOptions options{};
};
struct TokenizePayload {
  std::string text{};
  bool add_special_tokens = true;
};
struct DetokenizePayload {
  std::vector<int32_t> ids{};
};
// The ids of the prompt `chat` renders to (its template, tools, tool_choice and thinking
// switch), as a chat job would run it; answered by a TokensMessage (count_tokens).
struct ChatTokenizePayload {
  ChatPayload chat{};
};
// The inputs of a task job: texts, or token ids (embed and classify).
struct TaskInputs {
  std::vector<std::string> texts{};
  std::vector<std::vector<int32_t>> ids{};
  int64_t max_input_tokens = 0;  // an input past this is refused (0: the context)
};
struct EmbedPayload {  // one vector per input
  TaskInputs inputs{};
  std::string prompt_name;  // the model's prompt ("query"), or empty
  int32_t dimensions = 0;   // keep the first dimensions (0: all)
};
struct RerankPayload {  // one relevance score per document
  std::string query{};
  TaskInputs documents{};
  std::string instruction{};  // the task instruction, or empty
};
struct ClassifyPayload {  // class probabilities per input
  TaskInputs inputs{};
  int32_t truncate_prompt_tokens = -1;  // keep the last N tokens (-1: none)
  bool use_activation = true;           // softmax (else raw scores)
  bool add_special_tokens = true;
};
struct ModeratePayload {  // guard label scores per input, or for the conversation
  TaskInputs inputs{};
  std::vector<ChatMessage> messages{};  // when given: the conversation is judged
};
struct SystemOnePayload {  // probabilities of each question's options about the state
  std::string state{};
  std::vector<Question> questions{};
};
using JobPayload = std::variant<ChatPayload, CompletionPayload, TokenizePayload, DetokenizePayload,
                                EmbedPayload, RerankPayload, ClassifyPayload, ModeratePayload,
                                SystemOnePayload, ChatTokenizePayload>;

// The payload's kind as logs and errors name it ("chat", "embed", ...).
std::string_view JobPayloadName(const JobPayload& payload);

struct JobRequest {
  static constexpr MessageType kType = MessageType::kJobRequest;
  uint64_t job_id = 0;
  std::string model;
  JobPayload payload;
  // Whose cached prefixes the job may reuse (every job kind that runs a prompt): the API key's
  // name unless the server shares one cache, and the request's cache_salt.
  CacheScope cache_scope{};
};

struct CancelRequest {
  static constexpr MessageType kType = MessageType::kCancel;
  uint64_t job_id = 0;
};

// A model served from now on, as the worker's --model/--kind give one (ModelEntry): the server
// pulled it while running. Loaded on demand like the others; a name already known is ignored.
struct AddModelMessage {
  static constexpr MessageType kType = MessageType::kAddModel;
  std::string name;
  std::string dir;
  ModelKind kind = ModelKind::kChat;
};

struct ReadyMessage {
  static constexpr MessageType kType = MessageType::kReady;
  std::string model;  // the model that was loaded and warmed
};

struct StartedMessage {
  static constexpr MessageType kType = MessageType::kStarted;
  uint64_t job_id = 0;
  int64_t prompt_tokens = 0;
  ResolvedSamplingParams sampling;
};

struct TopLogprob {
  std::string token;
  float logprob = 0.0f;
};

struct TokenLogprobEntry {
  std::string token;
  float logprob = 0.0f;
  std::vector<TopLogprob> top;
};

// One OpenAI delta.tool_calls entry: id and name on a call's first fragment.
struct ToolCallFragment {
  int32_t index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

struct DeltaMessage {
  static constexpr MessageType kType = MessageType::kDelta;
  uint64_t job_id = 0;
  std::string text;
  std::vector<TokenLogprobEntry> logprobs;  // one per token of this delta, when asked
  // Tokens generated so far (this one included): errors after a delta still report usage.
  int64_t completion_tokens = 0;
  int32_t choice = 0;                        // which of the request's n choices
  std::vector<ToolCallFragment> tool_calls;  // parsed from the model's tool-call markup
};

// Why a choice ended (OpenAI's finish_reason; FinishReasonName gives its text).
enum class FinishReason : uint8_t { kStop = 1, kLength = 2, kToolCalls = 3, kCancelled = 4 };
std::string_view FinishReasonName(FinishReason r);

struct DoneMessage {
  static constexpr MessageType kType = MessageType::kDone;
  uint64_t job_id = 0;
  FinishReason finish_reason = FinishReason::kStop;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens whose KV cache was reused, not computed
  double queue_ms = 0;        // waiting inside the worker for a sequence slot
  double load_ms = 0;         // model load and prewarm this job had to wait for (0 when resident)
  double prefill_ms = 0;
  double ttft_ms = 0;
  double decode_ms = 0;
  double prefill_tok_s = 0;
  double decode_tok_s = 0;
  // Every choice's finish reason when n > 1 (finish_reason is choice 0's).
  std::vector<FinishReason> choice_finish_reasons;
  // The stop string that ended choice 0 (finish_reason kStop), or empty (an end-of-turn token).
  std::string stop_sequence{};
  // The model's scheduler when the job ended: its slots, how many run a sequence, sequences
  // waiting for one, and its KV block pool: blocks, blocks available (free or cached and
  // evictable), blocks cached (holding a prefix nobody uses right now).
  int32_t slots = 0;
  int32_t slots_in_use = 0;
  int32_t sequences_waiting = 0;
  int64_t kv_blocks = 0;
  int64_t kv_blocks_free = 0;
  int64_t kv_blocks_cached = 0;
};

// The worker's exit status when its default model cannot be loaded at start (prewarm): the
// cause is in its log line; loading again would fail the same way, so the supervisor does not
// restart it (WorkerState::kFailed).
inline constexpr int kWorkerExitModelLoadFailed = 3;
// The worker's NPU reported itself lost: the server restarts the worker.
inline constexpr int kWorkerExitNpuLost = 4;

// Why a job failed; the HTTP side maps each to a status and OpenAI error type.
enum class JobErrorKind : uint8_t {
  kInvalidRequest = 1,  // 400
  kContextLength = 2,   // 400, code context_length_exceeded
  kModelNotFound = 3,   // 404
  kInternal = 4,        // 500; the message is safe to show (no paths or internals)
  kEngineBusy = 5,      // 503 engine_busy + Retry-After: a bound of the engine was hit while
                        // running (the NPU queue full or timed out); the message says which
};

// How a job reports a sequence that the engine ended with `status`: a bound that was hit
// (ResourceExhausted: the NPU queue, the KV pool) is the engine being busy, anything else an
// internal failure whose detail stays in the worker's log.
JobErrorKind EngineFailureKind(ErrorCode code);
std::string EngineFailureMessage(const std::string& detail, ErrorCode code);

struct JobErrorMessage {
  static constexpr MessageType kType = MessageType::kJobError;
  uint64_t job_id = 0;
  JobErrorKind kind = JobErrorKind::kInternal;
  std::string message;
  int64_t prompt_tokens = 0;  // known for kContextLength (the prompt that did not fit)
  std::string field{};        // the request field it is about (the HTTP error's param), or empty
};

struct TokensMessage {
  static constexpr MessageType kType = MessageType::kTokens;
  uint64_t job_id = 0;
  std::vector<int32_t> ids{};
};

struct TextMessage {
  static constexpr MessageType kType = MessageType::kText;
  uint64_t job_id = 0;
  std::string text;
};

// One answer of a task job, for input `index`.
struct TaskItem {
  int32_t index = 0;
  std::vector<float> values;            // embedding; {score}; class probabilities; label scores
  std::string label;                    // classify, moderate: the winning label
  int64_t tokens = 0;                   // the input's prompt tokens
  std::vector<std::string> categories;  // moderate: the guard's own categories
};

struct TaskResultMessage {
  static constexpr MessageType kType = MessageType::kTaskResult;
  uint64_t job_id = 0;
  std::vector<TaskItem> items;      // in input order
  std::vector<std::string> labels;  // classify, moderate: every class name, by index
  int64_t prompt_tokens = 0;
  // Of prompt_tokens, those not computed: reused from the prefix cache or a shared prompt.
  int64_t cached_tokens = 0;
  double queue_ms = 0;
  double run_ms = 0;
  double load_ms = 0;  // model load and prewarm this job had to wait for (0 when resident)
};

// The type byte of a payload; InvalidArgument for an empty payload or an unknown type.
Expected<MessageType> PeekMessageType(std::string_view payload);

// The payload of a message: its type byte, then its fields. Defined for every message
// struct above (explicitly instantiated in worker_protocol.cc).
template <typename M>
std::string Encode(const M& m);

// Checks the type byte, every length against what remains, every enum and range, and that
// nothing trails.
template <typename M>
Expected<M> Decode(std::string_view payload);

// Blocking frame I/O on a stream socket or pipe; EINTR is retried. WriteFrame never raises
// SIGPIPE. ReadFrame returns NotFound on a clean end of stream before a frame starts (the
// peer closed), and an error for a frame cut short or longer than max_bytes.
Status WriteFrame(int fd, std::string_view payload);
Expected<std::string> ReadFrame(int fd, uint32_t max_bytes = kMaxFrameBytes);

}  // namespace tessera::worker
