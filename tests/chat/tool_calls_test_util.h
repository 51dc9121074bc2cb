// Helpers for the tool-call parser tests: feeding a reply in pieces and comparing the events.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_calls.h"

namespace tessera::test {

struct FedReply {
  ToolCallEvents events;  // adjacent content merged
  std::vector<ToolCall> calls;
  std::string content;
};

inline void AppendMerged(const ToolCallEvents& in, ToolCallEvents* out) {
  for (const ToolCallEvent& e : in) {
    if (e.kind == ToolCallEvent::Kind::kContent && !out->empty() &&
        out->back().kind == ToolCallEvent::Kind::kContent) {
      out->back().content += e.content;
    } else {
      out->push_back(e);
    }
  }
}

// Feeds `text` in pieces of the given sizes (the last piece takes the rest), then Finish.
inline FedReply FeedPieces(ToolCallSyntax syntax, std::string_view text,
                           const std::vector<size_t>& sizes,
                           const ToolCallParserOptions& options = {}) {
  ToolCallParser parser(syntax, options);
  FedReply r;
  size_t pos = 0;
  for (size_t n : sizes) {
    if (pos >= text.size()) break;
    n = std::min(n, text.size() - pos);
    AppendMerged(parser.Feed(text.substr(pos, n)), &r.events);
    pos += n;
  }
  if (pos < text.size()) AppendMerged(parser.Feed(text.substr(pos)), &r.events);
  AppendMerged(parser.Finish(), &r.events);
  r.calls = parser.calls();
  for (const ToolCallEvent& e : r.events) r.content += e.content;
  return r;
}

inline FedReply FeedWhole(ToolCallSyntax syntax, std::string_view text,
                          const ToolCallParserOptions& options = {}) {
  return FeedPieces(syntax, text, {text.size()}, options);
}

// Whole, byte by byte and `splits` random splittings all give the same merged events.
inline void ExpectSplitInvariant(ToolCallSyntax syntax, std::string_view text, int splits = 40,
                                 const ToolCallParserOptions& options = {}) {
  FedReply whole = FeedWhole(syntax, text, options);
  FedReply bytes = FeedPieces(syntax, text, std::vector<size_t>(text.size(), 1), options);
  EXPECT_EQ(bytes.events, whole.events) << "byte by byte: " << text;
  std::mt19937 rng(1234);
  for (int i = 0; i < splits; ++i) {
    std::vector<size_t> sizes;
    for (size_t left = text.size(); left > 0;) {
      size_t n = std::uniform_int_distribution<size_t>(1, std::min<size_t>(left, 9))(rng);
      sizes.push_back(n);
      left -= n;
    }
    FedReply split = FeedPieces(syntax, text, sizes, options);
    ASSERT_EQ(split.events, whole.events) << "split " << i << ": " << text;
  }
}

}  // namespace tessera::test
