// Hostile frames: every truncation and every single-byte corruption of valid messages must
// decode to an error or a value, never crash (run under ASan+UBSan with -L malformed).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/worker_protocol.h"

namespace tessera::server {
namespace {

std::vector<std::string> Samples() {
  JobRequest job;
  job.job_id = 1;
  job.kind = JobKind::kChat;
  job.messages = {{"user", "hello", "", "", ""}};
  job.ids = {1, 2};
  job.stop = {"x"};
  job.sampling.temperature = 1.0;
  return {EncodeJobRequest(job),
          EncodeDelta({1, "abc", {{"t", -1.0f, {{"u", -2.0f}}}}, 3, 0, {{0, "c", "f", "{}"}}}),
          EncodeStarted({}),
          EncodeDone({}),
          EncodeJobError({1, JobErrorKind::kContextLength, "m", 9}),
          EncodeTokens({1, {1, 2, 3}}),
          EncodeText({1, "t"})};
}

void DecodeAll(const std::string& p) {
  (void)PeekMessageType(p);
  (void)DecodeJobRequest(p);
  (void)DecodeCancel(p);
  (void)DecodeReady(p);
  (void)DecodeStarted(p);
  (void)DecodeDelta(p);
  (void)DecodeDone(p);
  (void)DecodeJobError(p);
  (void)DecodeTokens(p);
  (void)DecodeText(p);
}

TEST(WorkerProtocolMalformed, TruncationsAreErrors) {
  for (const std::string& s : Samples()) {
    for (size_t n = 0; n < s.size(); ++n) {
      std::string cut = s.substr(0, n);
      DecodeAll(cut);
    }
  }
  // A truncated job request is always refused.
  std::string job = Samples()[0];
  for (size_t n = 0; n < job.size(); ++n) EXPECT_FALSE(DecodeJobRequest(job.substr(0, n))) << n;
}

TEST(WorkerProtocolMalformed, ByteFlipsNeverCrash) {
  for (const std::string& s : Samples()) {
    for (size_t i = 0; i < s.size(); ++i) {
      for (int v : {0x00, 0x01, 0x7f, 0x80, 0xff}) {
        std::string bad = s;
        bad[i] = static_cast<char>(v);
        DecodeAll(bad);
      }
    }
  }
}

TEST(WorkerProtocolMalformed, HugeCountsAreRefusedWithoutAllocating) {
  std::string p = EncodeTokens({1, {}});
  p[9] = p[10] = p[11] = p[12] = '\xff';  // count 2^32-1 with no data behind it
  EXPECT_FALSE(DecodeTokens(p));
}

TEST(WorkerProtocolMalformed, OversizedAndCutFrames) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const char header[4] = {'\xff', '\xff', '\xff', '\x7f'};
  ASSERT_EQ(write(sv[0], header, 4), 4);
  EXPECT_FALSE(ReadFrame(sv[1]));
  const char short_frame[6] = {10, 0, 0, 0, 1, 2};
  ASSERT_EQ(write(sv[0], short_frame, 6), 6);
  close(sv[0]);
  auto got = ReadFrame(sv[1]);
  EXPECT_FALSE(got);
  close(sv[1]);
}

}  // namespace
}  // namespace tessera::server
