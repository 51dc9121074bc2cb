// Progress of long operations. Library code (package conversion, the package writer, the
// synthetic checkpoint writer, model loading, downloads) never writes to the terminal: it
// reports typed events through a ProgressCallback, and the app chooses how they are shown.
// ProgressRenderer shows them as one redrawn line on a terminal (\r, redraws at most every
// 100 ms, the final line kept) or as plain lines in a pipe or a log (at the start, every 10%
// or 5 s, and at the end; never a control character).
//
//   ProgressRenderer shown = ProgressRenderer::ForStderr();      // a bar on a TTY, else lines
//   PackageOptions options; options.progress = shown.Callback();
//   ConvertToPackage(src, dst, options);  // "packing tensors  [#####     ]  48%  ..."
//
//   // In library code:
//   ReportProgress(progress, {.phase = "packing tensors", .done = n, .total = all,
//                             .unit = ProgressUnit::kBytes});
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace tessera {

enum class ProgressUnit : uint8_t { kItems, kBytes, kTensors, kLayers, kRepeats };

struct ProgressEvent {
  std::string_view phase{};  // what is being done, e.g. "packing tensors"; names the phase
  uint64_t done = 0;
  uint64_t total = 0;  // 0: unknown (a phase shown with its time only)
  ProgressUnit unit = ProgressUnit::kItems;
  bool finished = false;  // the phase's last event
};

using ProgressCallback = std::function<void(const ProgressEvent&)>;

// Calls `progress` when it is set.
inline void ReportProgress(const ProgressCallback& progress, const ProgressEvent& event) {
  if (progress) progress(event);
}

// "1.2 GiB", "512 B".
std::string FormatBytes(double bytes);
// "1.2 GiB" for bytes, "12 tensors", "3 layers", "7" for items.
std::string FormatAmount(uint64_t amount, ProgressUnit unit);

enum class ProgressStyle : uint8_t {
  kTerminal,  // one line redrawn with \r; the final state of each phase stays on its own line
  kPlain,     // whole lines only: start, every 10% or 5 s, end
};

class ProgressRenderer {
 public:
  using Sink = std::function<void(std::string_view)>;
  using Clock = std::chrono::steady_clock;
  using NowFn = std::function<Clock::time_point()>;

  // `sink` receives the text (terminal style: with \r; whole lines end in \n). `now` is the
  // clock (a fake one in tests).
  ProgressRenderer(ProgressStyle style, Sink sink, NowFn now = &Clock::now);
  // To stderr: the terminal style when stderr is a TTY, plain lines otherwise.
  static ProgressRenderer ForStderr();

  ProgressRenderer(const ProgressRenderer&) = delete;
  ProgressRenderer& operator=(const ProgressRenderer&) = delete;
  ~ProgressRenderer();

  void Update(const ProgressEvent& event);
  // A line of its own (a note between updates): a bar being drawn is ended first.
  void Note(std::string_view line);
  // Ends a bar being drawn (it stays as it was), so that what is written next (an error) starts
  // on a line of its own.
  void EndLine();
  // Forwards to Update; the renderer must outlive the callback's uses.
  ProgressCallback Callback();

  ProgressStyle style() const { return style_; }
  // Text put before every progress line, e.g. "tessera: " where the lines sit among the
  // command's own notes.
  void set_line_prefix(std::string prefix) { line_prefix_ = std::move(prefix); }

 private:
  void Begin(const ProgressEvent& event, Clock::time_point now);
  void Draw(const ProgressEvent& event, Clock::time_point now);
  std::string Describe(const ProgressEvent& event, Clock::time_point now) const;

  ProgressStyle style_;
  Sink sink_;
  NowFn now_;
  bool in_phase_ = false;  // a phase has begun and not finished
  std::string phase_;
  std::string line_prefix_;
  Clock::time_point begin_{};
  Clock::time_point last_shown_{};
  int last_tenth_ = -1;    // plain: the last 10% step printed
  bool bar_open_ = false;  // terminal: a line without its \n is on screen
  size_t bar_width_ = 0;
};

}  // namespace tessera
