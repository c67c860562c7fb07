#include "model/tokenizer/stream_decoder.h"

#include "model/tokenizer/unicode_text.h"

namespace placer::tokenizer {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool continues_text,
                             bool skip_special_tokens)
    : tokenizer_(tokenizer),
      skip_special_tokens_(skip_special_tokens),
      next_is_first_(!continues_text),
      start_strips_left_(continues_text ? 0 : tokenizer.text_strip().start) {}

std::string StreamDecoder::Add(std::int32_t id) {
  if (skip_special_tokens_ && tokenizer_.IsSpecial(id)) return "";
  std::optional<std::string> bytes = tokenizer_.TokenBytes(id, next_is_first_);
  if (!bytes) return "";
  next_is_first_ = false;
  held_ += *bytes;

  const TokenDecoder::TextStrip& strip = tokenizer_.text_strip();
  const std::string& content = strip.content;
  while (start_strips_left_ > 0 && !held_.empty()) {
    if (held_.compare(0, content.size(), content) == 0) {
      held_.erase(0, content.size());
      --start_strips_left_;
    } else if (held_.size() < content.size() && content.compare(0, held_.size(), held_) == 0) {
      return "";  // could still become the stripped character
    } else {
      start_strips_left_ = 0;
    }
  }
  if (start_strips_left_ > 0) return "";

  std::size_t ready = CompleteUtf8Prefix(held_);
  // Trailing characters that Strip would drop at the end of the text wait for what follows.
  for (int i = 0; i < strip.stop && ready >= content.size() && !content.empty() &&
                  held_.compare(ready - content.size(), content.size(), content) == 0;
       ++i) {
    ready -= content.size();
  }
  std::string out = ToValidUtf8(absl::string_view(held_).substr(0, ready));
  held_.erase(0, ready);
  return out;
}

std::string StreamDecoder::Finish() {
  std::string out = ToValidUtf8(StripWholeText(std::move(held_), tokenizer_.text_strip(),
                                               /*at_start=*/false, /*at_end=*/true));
  held_.clear();
  return out;
}

}  // namespace placer::tokenizer
