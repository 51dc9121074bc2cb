// Fuzzes the worker protocol as both ends read it: a byte stream split into frames by
// ReadFrame (from an in-memory file, as from the socket pair), each payload typed by
// PeekMessageType and decoded with Decode<M> for its type (the whole input is also decoded as
// one payload). Whatever decodes must survive Encode -> Decode -> Encode unchanged, or the
// server and the worker would disagree about a message.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "worker/protocol.h"

namespace ts = tessera::worker;

namespace {

template <typename M>
void DecodeAs(std::string_view payload) {
  auto m = ts::Decode<M>(payload);
  if (!m) return;
  const std::string once = ts::Encode(*m);
  auto again = ts::Decode<M>(once);
  if (!again) {
    fprintf(stderr, "a decoded message does not decode after Encode: %s\n",
            again.status().ToString().c_str());
    abort();
  }
  if (ts::Encode(*again) != once) {
    fprintf(stderr, "Encode(Decode(Encode(m))) differs from Encode(m)\n");
    abort();
  }
}

void DecodePayload(std::string_view payload) {
  auto type = ts::PeekMessageType(payload);
  if (!type) return;
  switch (*type) {
    case ts::MessageType::kJobRequest:
      return DecodeAs<ts::JobRequest>(payload);
    case ts::MessageType::kCancel:
      return DecodeAs<ts::CancelRequest>(payload);
    case ts::MessageType::kAddModel:
      return DecodeAs<ts::AddModelMessage>(payload);
    case ts::MessageType::kReady:
      return DecodeAs<ts::ReadyMessage>(payload);
    case ts::MessageType::kStarted:
      return DecodeAs<ts::StartedMessage>(payload);
    case ts::MessageType::kDelta:
      return DecodeAs<ts::DeltaMessage>(payload);
    case ts::MessageType::kDone:
      return DecodeAs<ts::DoneMessage>(payload);
    case ts::MessageType::kJobError:
      return DecodeAs<ts::JobErrorMessage>(payload);
    case ts::MessageType::kTokens:
      return DecodeAs<ts::TokensMessage>(payload);
    case ts::MessageType::kText:
      return DecodeAs<ts::TextMessage>(payload);
    case ts::MessageType::kTaskResult:
      return DecodeAs<ts::TaskResultMessage>(payload);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  DecodePayload(std::string_view(reinterpret_cast<const char*>(data), size));
  const int fd = memfd_create("fuzz-frames", 0);
  if (fd < 0 || write(fd, data, size) != static_cast<ssize_t>(size) || lseek(fd, 0, SEEK_SET)) {
    perror("memfd");
    abort();
  }
  // Bounded: each frame consumes at least its 4-byte header.
  while (true) {
    auto frame = ts::ReadFrame(fd, 1u << 16);
    if (!frame) break;
    DecodePayload(*frame);
  }
  close(fd);
  return 0;
}
