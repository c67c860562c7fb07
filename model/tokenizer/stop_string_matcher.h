// Watches streamed text for stop strings. Text that could be the beginning of a stop string
// is held back until it is known not to be one, so a stop string split across tokens is still
// found and never reaches the client; text before the match is released.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace placer::tokenizer {

class StopStringMatcher {
 public:
  // Empty strings are ignored.
  explicit StopStringMatcher(std::vector<std::string> stop_strings);

  struct Result {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string ended here; `text` is everything before it
  };
  // `text` is the next stretch of the output (complete UTF-8, as StreamDecoder gives it).
  Result Add(absl::string_view text);
  // The held text, released at the end of a stream that did not stop on a string.
  std::string Finish();

  bool active() const { return !stop_strings_.empty(); }

 private:
  std::vector<std::string> stop_strings_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace placer::tokenizer
