#include "base/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace tessera {
namespace {

constexpr auto kTerminalRedraw = std::chrono::milliseconds(100);
constexpr auto kPlainInterval = std::chrono::seconds(5);
constexpr int kBarWidth = 24;

std::string UnitName(ProgressUnit unit) {
  switch (unit) {
    case ProgressUnit::kTensors:
      return " tensors";
    case ProgressUnit::kLayers:
      return " layers";
    case ProgressUnit::kRepeats:
      return " repeats";
    case ProgressUnit::kItems:
    case ProgressUnit::kBytes:
      break;
  }
  return "";
}

std::string Seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, seconds < 10 ? "%.2f s" : "%.1f s", seconds);
  return text;
}

// "540 MiB / 1.2 GiB", "12 / 300 tensors".
std::string Ratio(const ProgressEvent& e) {
  if (e.unit == ProgressUnit::kBytes) {
    return FormatBytes(static_cast<double>(e.done)) + " / " +
           FormatBytes(static_cast<double>(e.total));
  }
  return std::to_string(e.done) + " / " + std::to_string(e.total) + UnitName(e.unit);
}

}  // namespace

std::string FormatBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
  return text;
}

std::string FormatAmount(uint64_t amount, ProgressUnit unit) {
  if (unit == ProgressUnit::kBytes) return FormatBytes(static_cast<double>(amount));
  return std::to_string(amount) + UnitName(unit);
}

ProgressRenderer::ProgressRenderer(ProgressStyle style, Sink sink, NowFn now)
    : style_(style), sink_(std::move(sink)), now_(std::move(now)) {}

ProgressRenderer ProgressRenderer::ForStderr() {
  return ProgressRenderer(
      isatty(STDERR_FILENO) != 0 ? ProgressStyle::kTerminal : ProgressStyle::kPlain,
      [](std::string_view text) {
        std::fwrite(text.data(), 1, text.size(), stderr);
        std::fflush(stderr);
      });
}

ProgressRenderer::~ProgressRenderer() {
  EndLine();
}

ProgressCallback ProgressRenderer::Callback() {
  return [this](const ProgressEvent& event) { Update(event); };
}

void ProgressRenderer::EndLine() {
  if (!bar_open_) return;
  sink_("\n");
  bar_open_ = false;
  bar_width_ = 0;
}

void ProgressRenderer::Note(std::string_view line) {
  EndLine();
  std::string text(line);
  text += '\n';
  sink_(text);
}

void ProgressRenderer::Begin(const ProgressEvent& event, Clock::time_point now) {
  EndLine();  // an unfinished phase's bar stays as it was
  in_phase_ = true;
  phase_ = std::string(event.phase);
  begin_ = now;
  last_tenth_ = -1;
}

std::string ProgressRenderer::Describe(const ProgressEvent& e, Clock::time_point now) const {
  const double seconds = std::chrono::duration<double>(now - begin_).count();
  std::string text = line_prefix_ + std::string(e.phase);
  if (e.finished) {
    text += ": done";
    if (e.done > 0) text += ", " + FormatAmount(e.done, e.unit);
    text += " in " + Seconds(seconds);
    if (e.unit == ProgressUnit::kBytes && e.done > 0 && seconds > 0) {
      text += " (" + FormatBytes(static_cast<double>(e.done) / seconds) + "/s)";
    }
    return text;
  }
  const bool bar = style_ == ProgressStyle::kTerminal;
  if (e.total == 0) {
    text += "...";
    if (e.done > 0) text += " " + FormatAmount(e.done, e.unit);
    if (seconds >= 1) text += "  " + Seconds(seconds);
    return text;
  }
  const double fraction = std::min(1.0, static_cast<double>(e.done) / static_cast<double>(e.total));
  const int percent = static_cast<int>(fraction * 100);
  if (bar) {
    const int filled = std::clamp(static_cast<int>(fraction * kBarWidth), 0, kBarWidth);
    text += "  [" + std::string(filled, '#') + std::string(kBarWidth - filled, ' ') + "] " +
            std::to_string(percent) + "%  " + Ratio(e);
  } else {
    text += ": " + std::to_string(percent) + "% (" + Ratio(e) + ")";
  }
  if (e.unit == ProgressUnit::kBytes && seconds >= 0.5 && e.done > 0) {
    const double rate = static_cast<double>(e.done) / seconds;
    text += "  " + FormatBytes(rate) + "/s";
    if (e.total > e.done) {
      text += "  ETA " + std::to_string(static_cast<long>((e.total - e.done) / rate)) + " s";
    }
  }
  return text;
}

void ProgressRenderer::Draw(const ProgressEvent& event, Clock::time_point now) {
  std::string line = Describe(event, now);
  const size_t width = line.size();
  // Spaces, not an escape sequence, wipe what a longer previous line left.
  if (line.size() < bar_width_) line.append(bar_width_ - line.size(), ' ');
  bar_width_ = width;
  sink_("\r" + line);
  bar_open_ = true;
  last_shown_ = now;
}

void ProgressRenderer::Update(const ProgressEvent& event) {
  const Clock::time_point now = now_();
  const bool first = !in_phase_ || event.phase != phase_;
  if (first) Begin(event, now);
  if (style_ == ProgressStyle::kTerminal) {
    if (first || event.finished || now - last_shown_ >= kTerminalRedraw) Draw(event, now);
    if (event.finished) EndLine();
  } else {
    // Tenths below 10: the end is the finished event's line.
    const int tenth = event.total > 0
                          ? static_cast<int>(std::min<uint64_t>(9, event.done * 10 / event.total))
                          : -1;
    if (first || event.finished || tenth > last_tenth_ || now - last_shown_ >= kPlainInterval) {
      sink_(Describe(event, now) + "\n");
      last_shown_ = now;
      last_tenth_ = std::max(last_tenth_, tenth);
    }
  }
  if (event.finished) in_phase_ = false;
}

}  // namespace tessera
