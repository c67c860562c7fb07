// Text in and out of generation: checks the text fields of a request (prompt, params.stop:
// UTF-8, how many, how long), turns the prompt into ids with the model's tokenizer, answers
// Tokenize, and streams UTF-8-safe text deltas beside the token ids, ending the stream at a
// stop string (which is never sent).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/tokenizer/stop_string_matcher.h"
#include "model/tokenizer/stream_decoder.h"
#include "placer/v1/placer.pb.h"
#include "server/model_slot.h"

namespace placer::server {

struct TextLimits {
  int max_stop_sequences = 8;          // --max-stop-sequences
  std::size_t max_stop_bytes = 256;    // per stop string
};

// The request's prompt as ids: prompt_token_ids as given, or `prompt` encoded (with the
// tokenizer's bos/template tokens). INVALID_ARGUMENT names the field (prompt, params.stop[i]);
// FAILED_PRECONDITION when text needs a tokenizer the model does not have.
absl::StatusOr<std::vector<int32_t>> ResolvePrompt(const v1::GenerateRequest& request,
                                                   const ModelSnapshot& model,
                                                   const TextLimits& limits);

// The Tokenize RPC.
absl::Status TokenizeText(const ModelSnapshot& model, const v1::TokenizeRequest& request,
                          v1::TokenizeResponse* response);

// Text for a stream of generated ids. Without a tokenizer it yields no text (and requests
// with stop strings were refused earlier).
class TextStream {
 public:
  TextStream(const tokenizer::Tokenizer* tokenizer, std::vector<std::string> stop_strings);

  struct Delta {
    std::string text;
    bool stopped = false;  // a stop string ended here; generation must end
  };
  Delta Add(int32_t id);
  // Held text at the end of a stream that did not stop on a string.
  std::string Finish();

 private:
  std::optional<tokenizer::StreamDecoder> decoder_;
  tokenizer::StopStringMatcher stop_;
  bool stopped_ = false;
};

}  // namespace placer::server
