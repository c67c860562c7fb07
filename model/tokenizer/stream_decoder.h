// Incremental detokenizer: fed one token id at a time, it returns only text that is complete
// UTF-8. Bytes of a character split across tokens (byte-level BPE, or SentencePiece's
// <0xNN> byte_fallback tokens) are held until the character is whole, so a stream never
// carries half a character. Everything Add() and Finish() return, concatenated, is exactly
// Tokenizer::Decode of the same ids (for a text that starts with them).
#pragma once

#include <cstdint>
#include <string>

#include "model/tokenizer/tokenizer.h"

namespace placer::tokenizer {

class StreamDecoder {
 public:
  // `continues_text`: the ids continue a text (a prompt), so none of them is the first token
  // and nothing is stripped from the start (SentencePiece's leading space is kept).
  StreamDecoder(const Tokenizer& tokenizer, bool continues_text, bool skip_special_tokens);

  // The text completed by `id` (often empty while a character is unfinished).
  std::string Add(std::int32_t id);
  // What is still held: an unfinished character comes out as U+FFFD.
  std::string Finish();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  bool next_is_first_;
  int start_strips_left_;  // Strip-after-Fuse still to apply at the start of the text
  std::string held_;
};

}  // namespace placer::tokenizer
