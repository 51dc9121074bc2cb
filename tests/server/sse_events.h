// The named server-sent events a wire writes ("event: NAME\ndata: JSON\n\n"), read back for the
// wire tests (Anthropic's and the Responses API's streams).
//
//   const std::vector<SseEvent> events = ParseSseEvents(wire->StreamEnd(meta, outcome, stats));
//   EXPECT_EQ(events.back().name, "message_stop");
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tessera::server::test {

struct ParsedSseEvent {
  std::string name;
  nlohmann::json data;
};

// Each frame is checked to be whole, "event: " then "data: ", and named as its data's type.
inline std::vector<ParsedSseEvent> ParseSseEvents(const std::string& frames) {
  std::vector<ParsedSseEvent> out;
  size_t at = 0;
  while (at < frames.size()) {
    const size_t end = frames.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << frames.substr(at);
    if (end == std::string::npos) break;
    const std::string frame = frames.substr(at, end - at);
    at = end + 2;
    const size_t nl = frame.find('\n');
    EXPECT_EQ(frame.rfind("event: ", 0), 0u) << frame;
    EXPECT_NE(nl, std::string::npos) << frame;
    if (nl == std::string::npos) break;
    EXPECT_EQ(frame.compare(nl + 1, 6, "data: "), 0) << frame;
    ParsedSseEvent e{frame.substr(7, nl - 7), nlohmann::json::parse(frame.substr(nl + 7))};
    EXPECT_EQ(e.data["type"], e.name) << frame;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace tessera::server::test
