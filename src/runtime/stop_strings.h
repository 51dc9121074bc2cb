// Stop strings over streamed text: the text before the first occurrence of any stop string is
// released, the stop string and everything after it never are. Text that could still turn
// into a stop string once more tokens arrive (a suffix that is a prefix of some stop string)
// is held back, so a stop string split across tokens never leaks into a stream either.
//
//   StopStringFilter filter({"\n\n", "END"});
//   StopStringFilter::Step a = filter.Push("Hello EN");  // a.text == "Hello ", "EN" held
//   StopStringFilter::Step b = filter.Push("D more");    // b.text == "", b.stopped == true
//   std::string tail = filter.Finish();                  // "" (stopped), else what was held
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class StopStringFilter {
 public:
  struct Step {
    std::string text;      // safe to show now
    bool stopped = false;  // a stop string was found; ignore anything pushed later
  };

  // Empty stop strings are ignored (they would match everywhere).
  explicit StopStringFilter(std::vector<std::string> stops);

  Step Push(std::string_view text);
  // The held-back text at the end of generation (nothing after a stop).
  std::string Finish();
  // The stop string that stopped the text (the first listed of those found at the earliest
  // position), or empty.
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace tessera
