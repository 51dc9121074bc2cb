#include "worker/protocol.h"

#include <sys/socket.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <concepts>
#include <cstring>
#include <type_traits>
#include <variant>

namespace tessera::worker {
namespace {

// No field may claim more elements than this; a real list is far shorter, and the check keeps
// a corrupt count from reserving gigabytes before the bounds check on the data catches it.
constexpr uint32_t kMaxListElements = 1u << 22;

// Writes fields in order. Describe(WireWriter&, const M&) and Describe(WireReader&, M&) are
// the same template: each message's field list exists once.
class WireWriter {
 public:
  explicit WireWriter(MessageType type) { out_.push_back(static_cast<char>(type)); }
  void operator()(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void operator()(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void operator()(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void operator()(int64_t v) { (*this)(static_cast<uint64_t>(v)); }
  void operator()(int32_t v) { (*this)(static_cast<uint32_t>(v)); }
  void operator()(double v) { (*this)(std::bit_cast<uint64_t>(v)); }
  void operator()(float v) { (*this)(std::bit_cast<uint32_t>(v)); }
  void operator()(bool v) { (*this)(static_cast<uint8_t>(v ? 1 : 0)); }
  void operator()(const std::string& s) {
    (*this)(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  template <typename T>
  void operator()(const std::optional<T>& v) {
    (*this)(v.has_value());
    if (v) (*this)(*v);
  }
  // An enum as one byte; the reader accepts only [lo, hi].
  template <typename E>
  void Enum(const E& v, E /*lo*/, E /*hi*/) {
    (*this)(static_cast<uint8_t>(v));
  }
  // A u32 count, then each element through `each`; the reader refuses more than max_count
  // and counts the message cannot hold at min_bytes per element.
  template <typename T, typename Each>
  void List(const std::vector<T>& v, size_t /*min_bytes*/, size_t /*max_count*/, Each&& each) {
    (*this)(static_cast<uint32_t>(v.size()));
    for (const T& e : v) each(e);
  }
  template <typename T>
  void List(const std::vector<T>& v, size_t min_bytes, size_t max_count) {
    List(v, min_bytes, max_count, [this](const T& e) { (*this)(e); });
  }
  // The alternative's index as one byte, then the alternative through `each`.
  template <typename... T, typename Each>
  void Variant(const std::variant<T...>& v, Each&& each) {
    static_assert(sizeof...(T) < 256);
    (*this)(static_cast<uint8_t>(v.index()));
    std::visit(each, v);
  }
  // A condition every valid message meets; checked when reading (why: the error).
  void Check(bool /*holds*/, const char* /*why*/) {}
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads fields in order; the first problem is remembered and every later read leaves a zero
// value, so a message is read straight through and Finish() checked once.
class WireReader {
 public:
  WireReader(std::string_view payload, MessageType expected) : data_(payload) {
    if (data_.empty() || static_cast<uint8_t>(data_[0]) != static_cast<uint8_t>(expected)) {
      Fail("unexpected message type");
    } else {
      pos_ = 1;
    }
  }
  void operator()(uint8_t& v) { v = Need(1) ? static_cast<uint8_t>(data_[pos_++]) : 0; }
  void operator()(uint32_t& v) { v = static_cast<uint32_t>(Unsigned(4)); }
  void operator()(uint64_t& v) { v = Unsigned(8); }
  void operator()(int64_t& v) { v = static_cast<int64_t>(Unsigned(8)); }
  void operator()(int32_t& v) { v = static_cast<int32_t>(static_cast<uint32_t>(Unsigned(4))); }
  void operator()(double& v) { v = std::bit_cast<double>(Unsigned(8)); }
  void operator()(float& v) { v = std::bit_cast<float>(static_cast<uint32_t>(Unsigned(4))); }
  void operator()(bool& v) {
    uint8_t b = 0;
    (*this)(b);
    Check(b <= 1, "a boolean byte is neither 0 nor 1");
    v = b == 1;
  }
  void operator()(std::string& s) {
    uint32_t n = 0;
    (*this)(n);
    if (!Need(n)) return;
    s.assign(data_.substr(pos_, n));
    pos_ += n;
  }
  template <typename T>
  void operator()(std::optional<T>& v) {
    bool present = false;
    (*this)(present);
    v.reset();
    if (present && ok()) (*this)(v.emplace());
  }
  template <typename E>
  void Enum(E& v, E lo, E hi) {
    uint8_t b = 0;
    (*this)(b);
    Check(b >= static_cast<uint8_t>(lo) && b <= static_cast<uint8_t>(hi),
          "an enum value is out of range");
    v = static_cast<E>(b);
  }
  template <typename T, typename Each>
  void List(std::vector<T>& v, size_t min_bytes, size_t max_count, Each&& each) {
    uint32_t n = 0;
    (*this)(n);
    if (!ok()) return;
    if (n > max_count || n > kMaxListElements ||
        (min_bytes > 0 && n > (data_.size() - pos_) / min_bytes)) {
      Fail("a list count is larger than allowed or than the message");
      return;
    }
    v.clear();
    v.reserve(n);
    for (uint32_t i = 0; i < n && ok(); ++i) each(v.emplace_back());
  }
  template <typename T>
  void List(std::vector<T>& v, size_t min_bytes, size_t max_count) {
    List(v, min_bytes, max_count, [this](T& e) { (*this)(e); });
  }
  template <typename... T, typename Each>
  void Variant(std::variant<T...>& v, Each&& each) {
    uint8_t index = 0;
    (*this)(index);
    Check(index < sizeof...(T), "a variant index is out of range");
    if (!ok()) return;
    Emplace<0>(v, index);
    std::visit(each, v);
  }
  void Check(bool holds, const char* why) {
    if (ok() && !holds) Fail(why);
  }
  bool ok() const { return error_.empty(); }
  Status Finish() const {
    if (!ok()) return Corrupt("worker message: " + error_);
    if (pos_ != data_.size()) return Corrupt("worker message: trailing bytes");
    return Status::Ok();
  }

 private:
  uint64_t Unsigned(int bytes) {
    if (!Need(static_cast<size_t>(bytes))) return 0;
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_++])) << (8 * i);
    return v;
  }
  bool Need(size_t n) {
    if (!ok()) return false;
    if (n > data_.size() - pos_) {
      Fail("the message is cut short");
      return false;
    }
    return true;
  }
  void Fail(const char* why) {
    if (error_.empty()) error_ = why;
  }
  template <size_t I, typename... T>
  void Emplace(std::variant<T...>& v, size_t index) {
    if constexpr (I < sizeof...(T)) {
      if (index == I) {
        v.template emplace<I>();
      } else {
        Emplace<I + 1>(v, index);
      }
    }
  }
  std::string_view data_;
  size_t pos_ = 0;
  std::string error_;
};

// ---- the field lists: M is const for writing ----
// A list's min_bytes is the smallest encoding of one element (a string is its 4-byte count).

template <typename M, typename T>
concept Is = std::same_as<std::remove_const_t<M>, T>;

// The fields SamplingParams (requested) and ResolvedSamplingParams (what ran) share.
template <typename Io, typename S>
void DescribeSamplingFields(Io& io, S& s) {
  io(s.temperature);
  io(s.top_k);
  io(s.top_p);
  io(s.min_p);
  io(s.repetition_penalty);
  io(s.presence_penalty);
  io(s.frequency_penalty);
  io(s.seed);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, ChatMessage> {
  io(m.role);
  io(m.content);
  io(m.tool_calls);
  io(m.tool_call_id);
  io(m.name);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, ResponseFormat> {
  io.Enum(m.kind, ResponseFormatKind::kText, ResponseFormatKind::kDecision);
  io(m.schema);
  io.List(m.options, 12, kMaxListElements, [&](auto& o) {
    io(o.value);
    io(o.text);
    io(o.description);
  });
  io(m.property);
  io(m.question);
  io.Check(m.kind != ResponseFormatKind::kJsonSchema || !m.schema.empty(),
           "a json_schema response_format without its schema");
  io.Check(m.kind != ResponseFormatKind::kDecision || !m.options.empty(),
           "a decision without options");
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, GenerationOptions> {
  io(m.max_tokens);
  io.List(m.stop, 4, kMaxListElements);
  DescribeSamplingFields(io, m.sampling);
  io(m.logprobs);
  io(m.top_logprobs);
  io(m.n);
  io.Check(m.n >= 1 && m.n <= kMaxChoices, "n is outside 1..16");
  io.List(m.logit_bias, 12, kMaxLogitBias, [&](auto& entry) {
    io(entry.first);
    io(entry.second);
    io.Check(entry.first >= 0 && entry.second >= -100.0 && entry.second <= 100.0,
             "a logit bias out of range");
  });
  Describe(io, m.response_format);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, TaskInputs> {
  io.List(m.texts, 4, kMaxListElements);
  io.List(m.ids, 4, kMaxListElements, [&](auto& ids) { io.List(ids, 4, kMaxListElements); });
  io(m.max_input_tokens);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, ChatPayload> {
  io.List(m.messages, 20, kMaxListElements, [&](auto& msg) { Describe(io, msg); });
  io.List(m.tools, 9, kMaxListElements, [&](auto& t) {
    io(t.name);
    io(t.strict);
    io(t.definition);
  });
  io.Enum(m.tool_choice.mode, ToolChoiceMode::kAuto, ToolChoiceMode::kFunction);
  io(m.tool_choice.function);
  io.Check((m.tool_choice.mode == ToolChoiceMode::kFunction) != m.tool_choice.function.empty(),
           "a tool_choice function without its name, or a name without kFunction");
  Describe(io, m.options);
  io(m.enable_thinking);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, CompletionPayload> {
  io(m.prompt);
  Describe(io, m.options);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, TokenizePayload> {
  io(m.text);
  io(m.add_special_tokens);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, DetokenizePayload> {
  io.List(m.ids, 4, kMaxListElements);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, ChatTokenizePayload> {
  Describe(io, m.chat);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, EmbedPayload> {
  Describe(io, m.inputs);
  io(m.prompt_name);
  io(m.dimensions);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, RerankPayload> {
  io(m.query);
  Describe(io, m.documents);
  io(m.instruction);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, ClassifyPayload> {
  Describe(io, m.inputs);
  io(m.truncate_prompt_tokens);
  io(m.use_activation);
  io(m.add_special_tokens);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, ModeratePayload> {
  Describe(io, m.inputs);
  io.List(m.messages, 20, kMaxListElements, [&](auto& msg) { Describe(io, msg); });
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, SystemOnePayload> {
  io(m.state);
  io.List(m.questions, 14, kMaxListElements, [&](auto& q) {
    io.Enum(q.type, QuestionType::kChoice, QuestionType::kNoul);
    io(q.instructions);
    io.List(q.options, 4, kMaxListElements);
    io.List(q.descriptions, 4, kMaxListElements);
    io.Check(q.options.size() == q.descriptions.size(), "a question's descriptions do not match");
  });
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, CacheScope> {
  io(m.tenant);
  io(m.salt);
  io.Check(m.tenant.size() <= kMaxCacheTenantBytes && m.salt.size() <= kMaxCacheSaltBytes,
           "a cache scope is longer than its limits");
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, JobRequest> {
  io(m.job_id);
  io(m.model);
  io.Variant(m.payload, [&](auto& payload) { Describe(io, payload); });
  Describe(io, m.cache_scope);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, TaskResultMessage> {
  io(m.job_id);
  io.List(m.items, 24, kMaxListElements, [&](auto& item) {
    io(item.index);
    io.List(item.values, 4, kMaxListElements);
    io(item.label);
    io(item.tokens);
    io.List(item.categories, 4, kMaxListElements);
  });
  io.List(m.labels, 4, kMaxListElements);
  io(m.prompt_tokens);
  io(m.cached_tokens);
  io(m.queue_ms);
  io(m.run_ms);
  io(m.load_ms);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, CancelRequest> {
  io(m.job_id);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, AddModelMessage> {
  io(m.name);
  io(m.dir);
  io.Enum(m.kind, ModelKind::kChat, ModelKind::kCompletion);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, ReadyMessage> {
  io(m.model);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, StartedMessage> {
  io(m.job_id);
  io(m.prompt_tokens);
  io.Enum(m.sampling.mode, SamplingMode::kGreedy, SamplingMode::kSample);
  DescribeSamplingFields(io, m.sampling);
  io(m.sampling.seed_was_generated);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, DeltaMessage> {
  io(m.job_id);
  io(m.text);
  io.List(m.logprobs, 12, kMaxListElements, [&](auto& e) {
    io(e.token);
    io(e.logprob);
    io.List(e.top, 8, kMaxListElements, [&](auto& t) {
      io(t.token);
      io(t.logprob);
    });
  });
  io(m.completion_tokens);
  io(m.choice);
  io.List(m.tool_calls, 16, kMaxListElements, [&](auto& t) {
    io(t.index);
    io(t.id);
    io(t.name);
    io(t.arguments);
  });
  io.Check(m.choice >= 0 && m.choice < kMaxChoices, "choice is out of range");
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, DoneMessage> {
  io(m.job_id);
  io.Enum(m.finish_reason, FinishReason::kStop, FinishReason::kCancelled);
  io(m.prompt_tokens);
  io(m.completion_tokens);
  io(m.cached_tokens);
  io(m.queue_ms);
  io(m.load_ms);
  io(m.prefill_ms);
  io(m.ttft_ms);
  io(m.decode_ms);
  io(m.prefill_tok_s);
  io(m.decode_tok_s);
  io.List(m.choice_finish_reasons, 1, kMaxChoices,
          [&](auto& r) { io.Enum(r, FinishReason::kStop, FinishReason::kCancelled); });
  io(m.stop_sequence);
  io(m.slots);
  io(m.slots_in_use);
  io(m.sequences_waiting);
  io(m.kv_blocks);
  io(m.kv_blocks_free);
  io(m.kv_blocks_cached);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, JobErrorMessage> {
  io(m.job_id);
  io.Enum(m.kind, JobErrorKind::kInvalidRequest, JobErrorKind::kEngineBusy);
  io(m.message);
  io(m.prompt_tokens);
  io(m.field);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, TokensMessage> {
  io(m.job_id);
  io.List(m.ids, 4, kMaxListElements);
}

template <typename Io, typename M>
void Describe(Io& io, M& m) requires Is<M, TextMessage> {
  io(m.job_id);
  io(m.text);
}

}  // namespace

std::string_view JobPayloadName(const JobPayload& payload) {
  static constexpr std::string_view kNames[] = {
      "chat",   "completion", "tokenize", "detokenize", "embed",
      "rerank", "classify",   "moderate", "systemone",  "chat_tokenize"};
  static_assert(std::size(kNames) == std::variant_size_v<JobPayload>);
  return kNames[payload.index()];
}

std::string_view FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kToolCalls:
      return "tool_calls";
    case FinishReason::kCancelled:
      return "cancelled";
  }
  return "stop";
}

Expected<MessageType> PeekMessageType(std::string_view payload) {
  if (payload.empty()) return InvalidArgument("worker message: empty frame");
  uint8_t t = static_cast<uint8_t>(payload[0]);
  switch (static_cast<MessageType>(t)) {
    case MessageType::kJobRequest:
    case MessageType::kCancel:
    case MessageType::kAddModel:
    case MessageType::kReady:
    case MessageType::kStarted:
    case MessageType::kDelta:
    case MessageType::kDone:
    case MessageType::kJobError:
    case MessageType::kTokens:
    case MessageType::kText:
    case MessageType::kTaskResult:
      return static_cast<MessageType>(t);
  }
  return InvalidArgument("worker message: unknown type " + std::to_string(t));
}

template <typename M>
std::string Encode(const M& m) {
  WireWriter w(M::kType);
  Describe(w, m);
  return w.Take();
}

template <typename M>
Expected<M> Decode(std::string_view payload) {
  WireReader r(payload, M::kType);
  M m;
  Describe(r, m);
  if (Status st = r.Finish(); !st.ok()) return st;
  return m;
}

// The codec table: one line per message.
#define TESSERA_WORKER_MESSAGE(M)             \
  template std::string Encode<M>(const M& m); \
  template Expected<M> Decode<M>(std::string_view payload);
TESSERA_WORKER_MESSAGE(JobRequest)
TESSERA_WORKER_MESSAGE(CancelRequest)
TESSERA_WORKER_MESSAGE(AddModelMessage)
TESSERA_WORKER_MESSAGE(ReadyMessage)
TESSERA_WORKER_MESSAGE(StartedMessage)
TESSERA_WORKER_MESSAGE(DeltaMessage)
TESSERA_WORKER_MESSAGE(DoneMessage)
TESSERA_WORKER_MESSAGE(JobErrorMessage)
TESSERA_WORKER_MESSAGE(TokensMessage)
TESSERA_WORKER_MESSAGE(TextMessage)
TESSERA_WORKER_MESSAGE(TaskResultMessage)
#undef TESSERA_WORKER_MESSAGE

Status WriteFrame(int fd, std::string_view payload) {
  if (payload.size() > kMaxFrameBytes) return OutOfRange("worker message too large");
  std::string frame;
  frame.reserve(4 + payload.size());
  uint32_t n = static_cast<uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) frame.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  frame.append(payload);
  size_t done = 0;
  while (done < frame.size()) {
    ssize_t w = ::send(fd, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return IoError(std::string("worker channel write failed: ") + std::strerror(errno));
    }
    done += static_cast<size_t>(w);
  }
  return Status::Ok();
}

namespace {
// Reads exactly n bytes. Returns the count read before a clean end of stream (< n), or -1.
ssize_t ReadFully(int fd, char* buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::read(fd, buf + done, n - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return static_cast<ssize_t>(done);
}
}  // namespace

Expected<std::string> ReadFrame(int fd, uint32_t max_bytes) {
  char header[4];
  ssize_t got = ReadFully(fd, header, 4);
  if (got == 0) return NotFound("worker channel closed");
  if (got != 4) return IoError("worker channel: frame header cut short");
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i)
    n |= static_cast<uint32_t>(static_cast<uint8_t>(header[i])) << (8 * i);
  if (n > max_bytes)
    return OutOfRange("worker channel: frame of " + std::to_string(n) + " bytes is over the limit");
  std::string payload(n, '\0');
  if (ReadFully(fd, payload.data(), n) != static_cast<ssize_t>(n)) {
    return IoError("worker channel: frame cut short");
  }
  return payload;
}

JobErrorKind EngineFailureKind(ErrorCode code) {
  return code == ErrorCode::kResourceExhausted ? JobErrorKind::kEngineBusy
                                               : JobErrorKind::kInternal;
}

std::string EngineFailureMessage(const std::string& detail, ErrorCode code) {
  if (code == ErrorCode::kResourceExhausted)
    return "the engine is busy: " + detail + "; retry later";
  return "the model failed while running this request";
}

}  // namespace tessera::worker
