#include "model/tokenizer/stop_string_matcher.h"

#include <algorithm>

namespace placer::tokenizer {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings) {
  for (std::string& stop : stop_strings) {
    if (!stop.empty()) stop_strings_.push_back(std::move(stop));
  }
}

StopStringMatcher::Result StopStringMatcher::Add(absl::string_view text) {
  Result result;
  if (stopped_) {
    result.stopped = true;
    return result;
  }
  held_.append(text.data(), text.size());
  // The earliest match wins: the client sees the least text.
  std::size_t match = std::string::npos;
  for (const std::string& stop : stop_strings_) match = std::min(match, held_.find(stop));
  if (match != std::string::npos) {
    result.text = held_.substr(0, match);
    result.stopped = stopped_ = true;
    held_.clear();
    return result;
  }
  // Hold the longest tail that is a proper prefix of some stop string. Stop strings are
  // UTF-8, so that tail starts on a character boundary.
  std::size_t keep = 0;
  for (const std::string& stop : stop_strings_) {
    for (std::size_t length = std::min(stop.size() - 1, held_.size()); length > keep; --length) {
      if (held_.compare(held_.size() - length, length, stop, 0, length) == 0) {
        keep = length;
        break;
      }
    }
  }
  result.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return result;
}

std::string StopStringMatcher::Finish() {
  std::string out = stopped_ ? std::string() : std::move(held_);
  held_.clear();
  return out;
}

}  // namespace placer::tokenizer
