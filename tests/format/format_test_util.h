// Helpers shared by the format tests: hand-built safetensors bytes and one-line error checks.
//
//   std::string bytes = RawSafetensors(R"({"w":{"dtype":"F32","shape":[1],...}})", 4);
//   ExpectOneLineError(result.status(), ErrorCode::kCorrupt, {"data_offsets"});
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "base/status.h"

namespace tessera::test {

// 8-byte little-endian length, the header text as given, then `data_bytes` bytes of 0xAB.
inline std::string RawSafetensors(const std::string& header, size_t data_bytes) {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += header;
  out.append(data_bytes, '\xAB');
  return out;
}

// Only the first 8 bytes: a length field claiming `n` header bytes.
inline std::string LengthPrefix(uint64_t n) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out;
}

// The error is of `code`, one line, and mentions every fragment.
inline void ExpectOneLineError(const Status& status, ErrorCode code,
                               std::initializer_list<const char*> fragments) {
  ASSERT_FALSE(status.ok()) << "expected an error";
  EXPECT_EQ(status.code(), code) << status.message();
  EXPECT_FALSE(status.message().empty());
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
  for (const char* fragment : fragments) {
    EXPECT_NE(status.message().find(fragment), std::string::npos)
        << "missing '" << fragment << "' in: " << status.message();
  }
}

}  // namespace tessera::test
