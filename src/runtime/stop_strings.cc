#include "runtime/stop_strings.h"

#include <algorithm>

namespace tessera {

StopStringFilter::StopStringFilter(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

StopStringFilter::Step StopStringFilter::Push(std::string_view text) {
  Step step;
  if (stopped_) {
    step.stopped = true;
    return step;
  }
  pending_.append(text);
  // The earliest occurrence of any stop string ends the output there.
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) {
    const size_t at = pending_.find(stop);
    if (at < first) {
      first = at;
      matched_ = stop;
    }
  }
  if (first != std::string::npos) {
    step.text = pending_.substr(0, first);
    step.stopped = true;
    stopped_ = true;
    pending_.clear();
    return step;
  }
  // Hold back the longest suffix that some stop string starts with.
  size_t hold = 0;
  for (const std::string& stop : stops_) {
    size_t longest = std::min(stop.size() - 1, pending_.size());
    for (size_t len = longest; len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, stop, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  step.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return step;
}

std::string StopStringFilter::Finish() {
  std::string rest = stopped_ ? std::string() : std::move(pending_);
  pending_.clear();
  return rest;
}

}  // namespace tessera
