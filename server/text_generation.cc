#include "server/text_generation.h"

#include "absl/strings/str_cat.h"
#include "model/tokenizer/tokenizer.h"
#include "base/utf8.h"
#include "model/tokenizer/unicode_text.h"
#include "base/status_macros.h"

namespace placer::server {
namespace {

absl::Status NoTokenizer(const ModelSnapshot& model, absl::string_view field) {
  return absl::FailedPreconditionError(absl::StrCat(
      field, ": text needs the tokenizer, and ", model.path,
      model.tokenizer_error.empty() ? " has no tokenizer.json"
                                    : absl::StrCat("'s tokenizer cannot be used (",
                                                   model.tokenizer_error, ")"),
      "; send token ids instead (prompt_token_ids, params.stop_token_ids)"));
}

absl::Status CheckStopStrings(const v1::SamplingParams& params, const TextLimits& limits) {
  if (params.stop_size() > limits.max_stop_sequences) {
    return absl::InvalidArgumentError(absl::StrCat(
        "params.stop: ", params.stop_size(), " stop strings, at most ", limits.max_stop_sequences,
        " are allowed (placerd --max-stop-sequences)"));
  }
  for (int i = 0; i < params.stop_size(); ++i) {
    const std::string field = absl::StrCat("params.stop[", i, "]");
    const std::string& stop = params.stop(i);
    if (stop.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": empty"));
    if (stop.size() > limits.max_stop_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": ", stop.size(),
                                                     " bytes, at most ", limits.max_stop_bytes,
                                                     " are allowed"));
    }
    PLACER_RETURN_IF_ERROR(CheckUtf8(stop, field));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> ResolvePrompt(const v1::GenerateRequest& request,
                                                   const ModelSnapshot& model,
                                                   const TextLimits& limits) {
  const v1::SamplingParams& params = request.params();
  PLACER_RETURN_IF_ERROR(CheckStopStrings(params, limits));
  if (!request.prompt().empty()) {
    PLACER_RETURN_IF_ERROR(CheckUtf8(request.prompt(), "prompt"));
  }
  const bool needs_tokenizer = !request.prompt().empty() || params.stop_size() > 0;
  if (needs_tokenizer && model.tokenizer == nullptr) {
    return NoTokenizer(model, request.prompt().empty() ? "params.stop" : "prompt");
  }
  if (request.prompt().empty()) {
    return std::vector<int32_t>(request.prompt_token_ids().begin(),
                                request.prompt_token_ids().end());
  }
  auto ids = model.tokenizer->Encode(request.prompt(), /*add_special_tokens=*/true);
  if (!ids.ok()) {
    return absl::Status(ids.status().code(), absl::StrCat("prompt: ", ids.status().message()));
  }
  if (ids->empty()) {
    return absl::InvalidArgumentError("prompt: the text encodes to no tokens");
  }
  return ids;
}

absl::Status TokenizeText(const ModelSnapshot& model, const v1::TokenizeRequest& request,
                          v1::TokenizeResponse* response) {
  if (model.tokenizer == nullptr) return NoTokenizer(model, "text");
  PLACER_ASSIGN_OR_RETURN(auto ids,
                          model.tokenizer->Encode(request.text(), request.add_special_tokens()));
  for (const int32_t id : ids) {
    response->add_token_ids(id);
    response->add_tokens(model.tokenizer->TokenText(id).value_or(""));
  }
  return absl::OkStatus();
}

TextStream::TextStream(const tokenizer::Tokenizer* tokenizer, std::vector<std::string> stop_strings)
    : stop_(std::move(stop_strings)) {
  // Generated text continues the prompt: a SentencePiece leading space is part of it.
  if (tokenizer != nullptr) {
    decoder_.emplace(*tokenizer, /*continues_text=*/true, /*skip_special_tokens=*/true);
  }
}

TextStream::Delta TextStream::Add(int32_t id) {
  Delta delta;
  if (!decoder_ || stopped_) {
    delta.stopped = stopped_;
    return delta;
  }
  tokenizer::StopStringMatcher::Result result = stop_.Add(decoder_->Add(id));
  delta.text = std::move(result.text);
  delta.stopped = stopped_ = result.stopped;
  return delta;
}

std::string TextStream::Finish() {
  if (!decoder_ || stopped_) return "";
  tokenizer::StopStringMatcher::Result result = stop_.Add(decoder_->Finish());
  // A stop string completed by the very last bytes still ends the text before it.
  if (result.stopped) {
    stopped_ = true;
    return result.text;
  }
  return result.text + stop_.Finish();
}

}  // namespace placer::server
