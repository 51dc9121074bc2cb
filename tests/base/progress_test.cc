#include "base/progress.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessera {
namespace {

using Clock = ProgressRenderer::Clock;

// A renderer writing into `out`, on a clock the test moves.
struct FakeSink {
  std::string out;
  Clock::time_point now{};
  ProgressRenderer Make(ProgressStyle style) {
    return ProgressRenderer(
        style, [this](std::string_view text) { out.append(text); }, [this] { return now; });
  }
  void Advance(int ms) { now += std::chrono::milliseconds(ms); }
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(text.substr(start, nl - start));
  }
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

bool HasControlCharacters(const std::string& text) {
  for (char c : text) {
    if (c != '\n' && (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)) return true;
  }
  return false;
}

ProgressEvent Bytes(uint64_t done, uint64_t total, bool finished = false) {
  return {.phase = "packing",
          .done = done,
          .total = total,
          .unit = ProgressUnit::kBytes,
          .finished = finished};
}

TEST(ProgressRendererTest, PlainLinesAtStartEveryTenthAndEnd) {
  FakeSink sink;
  {
    ProgressRenderer r = sink.Make(ProgressStyle::kPlain);
    const uint64_t total = 1000 << 20;
    // 1000 updates, 1 ms apart: only the start, each new tenth and the end are printed.
    for (uint64_t i = 0; i < 1000; ++i) {
      r.Update(Bytes(i << 20, total));
      sink.Advance(1);
    }
    r.Update(Bytes(total, total, true));
  }
  const std::vector<std::string> lines = Lines(sink.out);
  ASSERT_EQ(lines.size(), 11u) << sink.out;  // 0%, 10% .. 90%, done
  EXPECT_EQ(lines[0], "packing: 0% (0 B / 1000.0 MiB)");
  EXPECT_EQ(lines[1].rfind("packing: 10% (100.0 MiB / 1000.0 MiB)", 0), 0u) << lines[1];
  EXPECT_EQ(lines[10], "packing: done, 1000.0 MiB in 1.00 s (1000.0 MiB/s)");
  EXPECT_FALSE(HasControlCharacters(sink.out)) << sink.out;
}

TEST(ProgressRendererTest, PlainLinesEveryFewSecondsWithoutATotal) {
  FakeSink sink;
  ProgressRenderer r = sink.Make(ProgressStyle::kPlain);
  for (int i = 0; i < 13; ++i) {
    r.Update({.phase = "loading weights", .done = static_cast<uint64_t>(i)});
    sink.Advance(1000);
  }
  r.Update({.phase = "loading weights", .finished = true});
  // At 0 s, 5 s, 10 s, then the end.
  const std::vector<std::string> lines = Lines(sink.out);
  ASSERT_EQ(lines.size(), 4u) << sink.out;
  EXPECT_EQ(lines[0], "loading weights...");
  EXPECT_EQ(lines[3], "loading weights: done in 13.0 s");
  EXPECT_FALSE(HasControlCharacters(sink.out));
}

TEST(ProgressRendererTest, TerminalRedrawsOneLineAtMostEvery100ms) {
  FakeSink sink;
  ProgressRenderer r = sink.Make(ProgressStyle::kTerminal);
  const uint64_t total = 100;
  for (uint64_t i = 0; i < 100; ++i) {
    r.Update(
        {.phase = "writing tensors", .done = i, .total = total, .unit = ProgressUnit::kTensors});
    sink.Advance(10);
  }
  r.Update({.phase = "writing tensors",
            .done = total,
            .total = total,
            .unit = ProgressUnit::kTensors,
            .finished = true});
  // One line: redraws with \r (the first, one per 100 ms, the end), then its \n.
  const std::vector<std::string> lines = Lines(sink.out);
  ASSERT_EQ(lines.size(), 1u) << sink.out;
  const size_t redraws = static_cast<size_t>(std::count(sink.out.begin(), sink.out.end(), '\r'));
  EXPECT_EQ(redraws, 1u + 9u + 1u);  // at 0 ms, 100..900 ms, the end
  EXPECT_NE(sink.out.find("\rwriting tensors  [####"), std::string::npos) << sink.out;
  EXPECT_NE(sink.out.find("] 10%  10 / 100 tensors"), std::string::npos) << sink.out;
  // The final state stays: the last redraw, then the newline.
  const size_t last = sink.out.rfind('\r');
  EXPECT_EQ(sink.out.substr(last + 1).rfind("writing tensors: done, 100 tensors in 1.00 s", 0), 0u)
      << sink.out;
  EXPECT_EQ(sink.out.back(), '\n');
}

TEST(ProgressRendererTest, TerminalNoteEndsTheBarAndANewPhaseStartsOnItsOwnLine) {
  FakeSink sink;
  ProgressRenderer r = sink.Make(ProgressStyle::kTerminal);
  r.Update(Bytes(1, 4));
  r.Note("a note");
  r.Update({.phase = "hashing", .done = 1, .total = 2});
  r.Update({.phase = "verifying", .done = 0, .total = 2});
  const std::vector<std::string> lines = Lines(sink.out);
  ASSERT_EQ(lines.size(), 4u) << sink.out;
  EXPECT_EQ(lines[1], "a note");
  EXPECT_EQ(lines[2].rfind("\rhashing", 0), 0u);
  EXPECT_EQ(lines[3].rfind("\rverifying", 0), 0u);
}

TEST(ProgressRendererTest, ShorterRedrawsWipeTheLongerLine) {
  FakeSink sink;
  ProgressRenderer r = sink.Make(ProgressStyle::kTerminal);
  r.Update({.phase = "p", .done = 123456, .total = 1234567, .unit = ProgressUnit::kTensors});
  const size_t first = sink.out.size();
  sink.out.clear();
  sink.Advance(200);
  r.Update({.phase = "p", .finished = true});
  EXPECT_GE(sink.out.size(), first);  // padded with spaces to the earlier width, then \n
}

TEST(ProgressFormatTest, Amounts) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1.5 * (1 << 30)), "1.5 GiB");
  EXPECT_EQ(FormatAmount(3, ProgressUnit::kLayers), "3 layers");
  EXPECT_EQ(FormatAmount(7, ProgressUnit::kItems), "7");
  EXPECT_EQ(FormatAmount(2, ProgressUnit::kRepeats), "2 repeats");
}

TEST(ProgressRendererTest, EveryLineCarriesTheLinePrefix) {
  // Loading in generate/chat: the phase lines sit among "tessera: " notes.
  for (ProgressStyle style : {ProgressStyle::kPlain, ProgressStyle::kTerminal}) {
    FakeSink sink;
    ProgressRenderer r = sink.Make(style);
    r.set_line_prefix("tessera: ");
    r.Update({.phase = "repeats", .done = 0, .total = 2, .unit = ProgressUnit::kRepeats});
    sink.Advance(200);
    r.Update({.phase = "repeats",
              .done = 2,
              .total = 2,
              .unit = ProgressUnit::kRepeats,
              .finished = true});
    std::string text = sink.out;
    for (char& c : text) {
      if (c == '\r') c = '\n';
    }
    for (const std::string& line : Lines(text)) {
      if (line.empty()) continue;
      EXPECT_EQ(line.rfind("tessera: repeats", 0), 0u) << line;
    }
    EXPECT_NE(sink.out.find("done, 2 repeats in"), std::string::npos) << sink.out;
  }
}

}  // namespace
}  // namespace tessera
