#include "server/worker_protocol.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tessera::server {
namespace {

// No field may claim more elements than this; a real list is far shorter, and the check keeps
// a corrupt count from reserving gigabytes before the bounds check on the data catches it.
constexpr uint32_t kMaxListElements = 1u << 22;

class WireWriter {
 public:
  explicit WireWriter(MessageType type) { out_.push_back(static_cast<char>(type)); }
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void I32(int32_t v) { U32(static_cast<uint32_t>(v)); }
  void F64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    U64(bits);
  }
  void F32(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    U32(bits);
  }
  void Bool(bool v) { U8(v ? 1 : 0); }
  void Str(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void Ids(const std::vector<int32_t>& ids) {
    U32(static_cast<uint32_t>(ids.size()));
    for (int32_t id : ids) I32(id);
  }
  void OptF64(const std::optional<double>& v) {
    Bool(v.has_value());
    if (v) F64(*v);
  }
  void OptI64(const std::optional<int64_t>& v) {
    Bool(v.has_value());
    if (v) I64(*v);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads fields in order; the first problem is remembered and every later read returns a
// zero value, so a decoder reads straight through and checks Finish() once.
class WireReader {
 public:
  WireReader(std::string_view payload, MessageType expected) : data_(payload) {
    if (data_.empty() || static_cast<uint8_t>(data_[0]) != static_cast<uint8_t>(expected)) {
      Fail("unexpected message type");
    } else {
      pos_ = 1;
    }
  }
  uint8_t U8() {
    if (!Need(1)) return 0;
    return static_cast<uint8_t>(data_[pos_++]);
  }
  uint32_t U32() {
    if (!Need(4)) return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= static_cast<uint32_t>(static_cast<uint8_t>(data_[pos_++])) << (8 * i);
    return v;
  }
  uint64_t U64() {
    if (!Need(8)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_++])) << (8 * i);
    return v;
  }
  int64_t I64() { return static_cast<int64_t>(U64()); }
  int32_t I32() { return static_cast<int32_t>(U32()); }
  double F64() {
    uint64_t bits = U64();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  float F32() {
    uint32_t bits = U32();
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  bool Bool() {
    uint8_t v = U8();
    if (v > 1) Fail("a boolean byte is neither 0 nor 1");
    return v == 1;
  }
  std::string Str() {
    uint32_t n = U32();
    if (!Need(n)) return {};
    std::string s(data_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  // A list count, checked against the bytes left at `min_element_bytes` per element.
  uint32_t Count(size_t min_element_bytes) {
    uint32_t n = U32();
    if (n > kMaxListElements ||
        (min_element_bytes > 0 && n > (data_.size() - pos_) / min_element_bytes)) {
      Fail("a list count is larger than the message");
      return 0;
    }
    return n;
  }
  std::vector<int32_t> Ids() {
    uint32_t n = Count(4);
    std::vector<int32_t> ids;
    ids.reserve(n);
    for (uint32_t i = 0; i < n && ok(); ++i) ids.push_back(I32());
    return ids;
  }
  std::optional<double> OptF64() {
    if (!Bool()) return std::nullopt;
    return F64();
  }
  std::optional<int64_t> OptI64() {
    if (!Bool()) return std::nullopt;
    return I64();
  }
  bool ok() const { return error_.empty(); }
  Status Finish() const {
    if (!ok()) return Corrupt("worker message: " + error_);
    if (pos_ != data_.size()) return Corrupt("worker message: trailing bytes");
    return Status::Ok();
  }

 private:
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
  std::string_view data_;
  size_t pos_ = 0;
  std::string error_;
};

template <typename T>
Expected<T> Checked(const WireReader& r, T value) {
  if (Status st = r.Finish(); !st.ok()) return st;
  return value;
}

}  // namespace

Expected<MessageType> PeekMessageType(std::string_view payload) {
  if (payload.empty()) return InvalidArgument("worker message: empty frame");
  uint8_t t = static_cast<uint8_t>(payload[0]);
  switch (static_cast<MessageType>(t)) {
    case MessageType::kJobRequest:
    case MessageType::kCancel:
    case MessageType::kReady:
    case MessageType::kStarted:
    case MessageType::kDelta:
    case MessageType::kDone:
    case MessageType::kJobError:
    case MessageType::kTokens:
    case MessageType::kText:
      return static_cast<MessageType>(t);
  }
  return InvalidArgument("worker message: unknown type " + std::to_string(t));
}

std::string EncodeJobRequest(const JobRequest& m) {
  WireWriter w(MessageType::kJobRequest);
  w.U64(m.job_id);
  w.U8(static_cast<uint8_t>(m.kind));
  w.Str(m.model);
  w.Str(m.prompt);
  w.U32(static_cast<uint32_t>(m.messages.size()));
  for (const ChatMessage& msg : m.messages) {
    w.Str(msg.role);
    w.Str(msg.content);
    w.Str(msg.tool_calls);
    w.Str(msg.tool_call_id);
    w.Str(msg.name);
  }
  w.Ids(m.ids);
  w.Bool(m.add_special_tokens);
  w.I64(m.max_tokens);
  w.U32(static_cast<uint32_t>(m.stop.size()));
  for (const std::string& s : m.stop) w.Str(s);
  const SamplingParams& s = m.sampling;
  w.OptF64(s.temperature);
  w.OptI64(s.top_k);
  w.OptF64(s.top_p);
  w.OptF64(s.min_p);
  w.OptF64(s.repetition_penalty);
  w.OptF64(s.presence_penalty);
  w.OptF64(s.frequency_penalty);
  w.OptI64(s.seed);
  w.Bool(m.logprobs);
  w.I32(m.top_logprobs);
  w.I32(m.n);
  w.Str(m.response_format);
  w.Str(m.tools);
  w.Str(m.tool_choice);
  w.U32(static_cast<uint32_t>(m.logit_bias.size()));
  for (const auto& [id, bias] : m.logit_bias) {
    w.I32(id);
    w.F64(bias);
  }
  return w.Take();
}

Expected<JobRequest> DecodeJobRequest(std::string_view payload) {
  WireReader r(payload, MessageType::kJobRequest);
  JobRequest m;
  m.job_id = r.U64();
  uint8_t kind = r.U8();
  if (kind < static_cast<uint8_t>(JobKind::kChat) ||
      kind > static_cast<uint8_t>(JobKind::kDetokenize)) {
    if (r.ok()) return Corrupt("worker message: unknown job kind " + std::to_string(kind));
  }
  m.kind = static_cast<JobKind>(kind);
  m.model = r.Str();
  m.prompt = r.Str();
  uint32_t n = r.Count(20);
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    ChatMessage msg;
    msg.role = r.Str();
    msg.content = r.Str();
    msg.tool_calls = r.Str();
    msg.tool_call_id = r.Str();
    msg.name = r.Str();
    m.messages.push_back(std::move(msg));
  }
  m.ids = r.Ids();
  m.add_special_tokens = r.Bool();
  m.max_tokens = r.I64();
  n = r.Count(4);
  for (uint32_t i = 0; i < n && r.ok(); ++i) m.stop.push_back(r.Str());
  SamplingParams& s = m.sampling;
  s.temperature = r.OptF64();
  s.top_k = r.OptI64();
  s.top_p = r.OptF64();
  s.min_p = r.OptF64();
  s.repetition_penalty = r.OptF64();
  s.presence_penalty = r.OptF64();
  s.frequency_penalty = r.OptF64();
  s.seed = r.OptI64();
  m.logprobs = r.Bool();
  m.top_logprobs = r.I32();
  m.n = r.I32();
  m.response_format = r.Str();
  m.tools = r.Str();
  m.tool_choice = r.Str();
  const uint32_t biases = r.Count(12);
  if (r.ok() && biases > kMaxLogitBias) return Corrupt("worker message: too many logit biases");
  for (uint32_t i = 0; i < biases && r.ok(); ++i) {
    const int32_t id = r.I32();
    const double bias = r.F64();
    if (r.ok() && (id < 0 || !(bias >= -100.0 && bias <= 100.0))) {
      return Corrupt("worker message: a logit bias out of range");
    }
    m.logit_bias.emplace_back(id, bias);
  }
  if (r.ok() && (m.n < 1 || m.n > kMaxChoices)) {
    return Corrupt("worker message: n " + std::to_string(m.n) + " is outside 1.." +
                   std::to_string(kMaxChoices));
  }
  return Checked(r, std::move(m));
}

std::string EncodeCancel(const CancelRequest& m) {
  WireWriter w(MessageType::kCancel);
  w.U64(m.job_id);
  return w.Take();
}

Expected<CancelRequest> DecodeCancel(std::string_view payload) {
  WireReader r(payload, MessageType::kCancel);
  CancelRequest m;
  m.job_id = r.U64();
  return Checked(r, m);
}

std::string EncodeReady(const ReadyMessage& m) {
  WireWriter w(MessageType::kReady);
  w.Str(m.model);
  return w.Take();
}

Expected<ReadyMessage> DecodeReady(std::string_view payload) {
  WireReader r(payload, MessageType::kReady);
  ReadyMessage m;
  m.model = r.Str();
  return Checked(r, std::move(m));
}

std::string EncodeStarted(const StartedMessage& m) {
  WireWriter w(MessageType::kStarted);
  w.U64(m.job_id);
  w.I64(m.prompt_tokens);
  const ResolvedSamplingParams& s = m.sampling;
  w.U8(s.mode == SamplingMode::kSample ? 1 : 0);
  w.F64(s.temperature);
  w.I64(s.top_k);
  w.F64(s.top_p);
  w.F64(s.min_p);
  w.F64(s.repetition_penalty);
  w.F64(s.presence_penalty);
  w.F64(s.frequency_penalty);
  w.U64(s.seed);
  w.Bool(s.seed_was_generated);
  return w.Take();
}

Expected<StartedMessage> DecodeStarted(std::string_view payload) {
  WireReader r(payload, MessageType::kStarted);
  StartedMessage m;
  m.job_id = r.U64();
  m.prompt_tokens = r.I64();
  ResolvedSamplingParams& s = m.sampling;
  s.mode = r.Bool() ? SamplingMode::kSample : SamplingMode::kGreedy;
  s.temperature = r.F64();
  s.top_k = r.I64();
  s.top_p = r.F64();
  s.min_p = r.F64();
  s.repetition_penalty = r.F64();
  s.presence_penalty = r.F64();
  s.frequency_penalty = r.F64();
  s.seed = r.U64();
  s.seed_was_generated = r.Bool();
  return Checked(r, m);
}

std::string EncodeDelta(const DeltaMessage& m) {
  WireWriter w(MessageType::kDelta);
  w.U64(m.job_id);
  w.Str(m.text);
  w.U32(static_cast<uint32_t>(m.logprobs.size()));
  for (const TokenLogprobEntry& e : m.logprobs) {
    w.Str(e.token);
    w.F32(e.logprob);
    w.U32(static_cast<uint32_t>(e.top.size()));
    for (const TopLogprob& t : e.top) {
      w.Str(t.token);
      w.F32(t.logprob);
    }
  }
  w.I64(m.completion_tokens);
  w.I32(m.choice);
  w.U32(static_cast<uint32_t>(m.tool_calls.size()));
  for (const ToolCallFragment& t : m.tool_calls) {
    w.I32(t.index);
    w.Str(t.id);
    w.Str(t.name);
    w.Str(t.arguments);
  }
  return w.Take();
}

Expected<DeltaMessage> DecodeDelta(std::string_view payload) {
  WireReader r(payload, MessageType::kDelta);
  DeltaMessage m;
  m.job_id = r.U64();
  m.text = r.Str();
  uint32_t n = r.Count(12);
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    TokenLogprobEntry e;
    e.token = r.Str();
    e.logprob = r.F32();
    uint32_t k = r.Count(8);
    for (uint32_t j = 0; j < k && r.ok(); ++j) {
      TopLogprob t;
      t.token = r.Str();
      t.logprob = r.F32();
      e.top.push_back(std::move(t));
    }
    m.logprobs.push_back(std::move(e));
  }
  m.completion_tokens = r.I64();
  m.choice = r.I32();
  n = r.Count(16);
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    ToolCallFragment t;
    t.index = r.I32();
    t.id = r.Str();
    t.name = r.Str();
    t.arguments = r.Str();
    m.tool_calls.push_back(std::move(t));
  }
  if (r.ok() && (m.choice < 0 || m.choice >= kMaxChoices)) {
    return Corrupt("worker message: choice " + std::to_string(m.choice) + " is out of range");
  }
  return Checked(r, std::move(m));
}

std::string EncodeDone(const DoneMessage& m) {
  WireWriter w(MessageType::kDone);
  w.U64(m.job_id);
  w.Str(m.finish_reason);
  w.I64(m.prompt_tokens);
  w.I64(m.completion_tokens);
  w.I64(m.cached_tokens);
  w.F64(m.queue_ms);
  w.F64(m.load_ms);
  w.F64(m.prefill_ms);
  w.F64(m.ttft_ms);
  w.F64(m.decode_ms);
  w.F64(m.prefill_tok_s);
  w.F64(m.decode_tok_s);
  w.U32(static_cast<uint32_t>(m.choice_finish_reasons.size()));
  for (const std::string& f : m.choice_finish_reasons) w.Str(f);
  w.I32(m.slots);
  w.I32(m.slots_in_use);
  w.I32(m.sequences_waiting);
  w.I64(m.kv_blocks);
  w.I64(m.kv_blocks_free);
  w.I64(m.kv_blocks_cached);
  return w.Take();
}

Expected<DoneMessage> DecodeDone(std::string_view payload) {
  WireReader r(payload, MessageType::kDone);
  DoneMessage m;
  m.job_id = r.U64();
  m.finish_reason = r.Str();
  m.prompt_tokens = r.I64();
  m.completion_tokens = r.I64();
  m.cached_tokens = r.I64();
  m.queue_ms = r.F64();
  m.load_ms = r.F64();
  m.prefill_ms = r.F64();
  m.ttft_ms = r.F64();
  m.decode_ms = r.F64();
  m.prefill_tok_s = r.F64();
  m.decode_tok_s = r.F64();
  const uint32_t n = r.Count(4);
  if (r.ok() && n > static_cast<uint32_t>(kMaxChoices)) {
    return Corrupt("worker message: more finish reasons than choices");
  }
  for (uint32_t i = 0; i < n && r.ok(); ++i) m.choice_finish_reasons.push_back(r.Str());
  m.slots = r.I32();
  m.slots_in_use = r.I32();
  m.sequences_waiting = r.I32();
  m.kv_blocks = r.I64();
  m.kv_blocks_free = r.I64();
  m.kv_blocks_cached = r.I64();
  return Checked(r, std::move(m));
}

std::string EncodeJobError(const JobErrorMessage& m) {
  WireWriter w(MessageType::kJobError);
  w.U64(m.job_id);
  w.U8(static_cast<uint8_t>(m.kind));
  w.Str(m.message);
  w.I64(m.prompt_tokens);
  return w.Take();
}

Expected<JobErrorMessage> DecodeJobError(std::string_view payload) {
  WireReader r(payload, MessageType::kJobError);
  JobErrorMessage m;
  m.job_id = r.U64();
  uint8_t kind = r.U8();
  m.message = r.Str();
  m.prompt_tokens = r.I64();
  if (r.ok() && (kind < static_cast<uint8_t>(JobErrorKind::kInvalidRequest) ||
                 kind > static_cast<uint8_t>(JobErrorKind::kInternal))) {
    return Corrupt("worker message: unknown error kind " + std::to_string(kind));
  }
  m.kind = static_cast<JobErrorKind>(kind);
  return Checked(r, std::move(m));
}

std::string EncodeTokens(const TokensMessage& m) {
  WireWriter w(MessageType::kTokens);
  w.U64(m.job_id);
  w.Ids(m.ids);
  return w.Take();
}

Expected<TokensMessage> DecodeTokens(std::string_view payload) {
  WireReader r(payload, MessageType::kTokens);
  TokensMessage m;
  m.job_id = r.U64();
  m.ids = r.Ids();
  return Checked(r, std::move(m));
}

std::string EncodeText(const TextMessage& m) {
  WireWriter w(MessageType::kText);
  w.U64(m.job_id);
  w.Str(m.text);
  return w.Take();
}

Expected<TextMessage> DecodeText(std::string_view payload) {
  WireReader r(payload, MessageType::kText);
  TextMessage m;
  m.job_id = r.U64();
  m.text = r.Str();
  return Checked(r, std::move(m));
}

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

}  // namespace tessera::server
