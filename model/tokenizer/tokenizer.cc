#include "model/tokenizer/tokenizer.h"

#include "absl/strings/str_cat.h"
#include "model/tokenizer/tokenizer_json.h"
#include "model/tokenizer/unicode_text.h"
#include "base/status_macros.h"

namespace placer::tokenizer {
namespace {

const nlohmann::json& FieldOrNull(const nlohmann::json& object, const char* key) {
  static const nlohmann::json* null = new nlohmann::json();
  if (!object.is_object()) return *null;
  const auto found = object.find(key);
  return found == object.end() ? *null : *found;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Tokenizer>> Tokenizer::FromJson(
    const nlohmann::json& tokenizer_json, const nlohmann::json& tokenizer_config) {
  if (!tokenizer_json.is_object()) {
    return absl::InvalidArgumentError("tokenizer.json: expected a JSON object");
  }
  if (!tokenizer_config.is_null() && !tokenizer_config.is_object()) {
    return absl::InvalidArgumentError("tokenizer_config.json: expected a JSON object");
  }
  std::shared_ptr<Tokenizer> tokenizer(new Tokenizer);
  PLACER_ASSIGN_OR_RETURN(
      auto added,
      AddedTokens::FromJson(FieldOrNull(tokenizer_json, "added_tokens"), "added_tokens"));
  tokenizer->added_ = std::move(added);
  PLACER_ASSIGN_OR_RETURN(
      auto normalizer, NormalizerFromJson(FieldOrNull(tokenizer_json, "normalizer"), "normalizer"));
  tokenizer->normalizer_ = std::move(normalizer);
  PLACER_ASSIGN_OR_RETURN(
      auto pre_tokenizer,
      PreTokenizerFromJson(FieldOrNull(tokenizer_json, "pre_tokenizer"), "pre_tokenizer"));
  tokenizer->pre_tokenizer_ = std::move(pre_tokenizer);
  const nlohmann::json& model = FieldOrNull(tokenizer_json, "model");
  if (!model.is_object()) return JsonError("model", "missing or not an object");
  PLACER_ASSIGN_OR_RETURN(auto bpe, BpeModel::FromJson(model, "model"));
  tokenizer->model_ = std::move(bpe);
  PLACER_ASSIGN_OR_RETURN(
      auto decoder, TokenDecoder::FromJson(FieldOrNull(tokenizer_json, "decoder"), "decoder"));
  tokenizer->decoder_ = std::move(decoder);
  tokenizer->vocab_size_ = std::max(tokenizer->model_->id_limit(), tokenizer->added_.id_limit());
  auto special =
      ReadSpecialTokens(tokenizer_json, tokenizer_config, tokenizer->added_, *tokenizer->model_);
  if (!special.ok()) return special.status();
  for (const std::vector<std::int32_t>* ids : {&special->prefix, &special->suffix}) {
    for (const std::int32_t id : *ids) {
      if (!tokenizer->TokenText(id)) {
        return JsonError("post_processor",
                         absl::StrCat("special token id ", id, " is not in the vocabulary"));
      }
    }
  }
  tokenizer->special_ = *std::move(special);
  return std::shared_ptr<const Tokenizer>(std::move(tokenizer));
}

absl::StatusOr<std::shared_ptr<const Tokenizer>> Tokenizer::FromJsonText(
    absl::string_view tokenizer_json, absl::string_view tokenizer_config) {
  const nlohmann::json parsed = nlohmann::json::parse(tokenizer_json, nullptr, false);
  if (parsed.is_discarded()) return absl::InvalidArgumentError("tokenizer.json: not valid JSON");
  nlohmann::json config;
  if (!tokenizer_config.empty()) {
    config = nlohmann::json::parse(tokenizer_config, nullptr, false);
    if (config.is_discarded()) {
      return absl::InvalidArgumentError("tokenizer_config.json: not valid JSON");
    }
  }
  return FromJson(parsed, config);
}

absl::StatusOr<std::vector<std::int32_t>> Tokenizer::Encode(absl::string_view text,
                                                            bool add_special_tokens) const {
  PLACER_RETURN_IF_ERROR(CheckUtf8(text, "text"));
  std::vector<std::int32_t> ids;
  if (add_special_tokens) ids = special_.prefix;
  for (const Segment& segment : added_.Split(text)) {
    if (segment.added_id) {
      ids.push_back(*segment.added_id);
      continue;
    }
    absl::Status status = EncodeSegment(segment.text, segment.at_text_start, &ids);
    if (!status.ok()) return status;
  }
  if (add_special_tokens) ids.insert(ids.end(), special_.suffix.begin(), special_.suffix.end());
  return ids;
}

absl::Status Tokenizer::EncodeSegment(absl::string_view text, bool at_text_start,
                                      std::vector<std::int32_t>* ids) const {
  std::string normalized(text);
  if (normalizer_ != nullptr) {
    PLACER_ASSIGN_OR_RETURN(auto applied, normalizer_->Apply(std::move(normalized)));
    normalized = std::move(applied);
  }
  std::vector<Piece> pieces = {{std::move(normalized), at_text_start}};
  if (pre_tokenizer_ != nullptr) {
    absl::Status status = pre_tokenizer_->Apply(&pieces);
    if (!status.ok()) return status;
  }
  for (const Piece& piece : pieces) model_->Encode(piece.text, ids);
  return absl::OkStatus();
}

std::optional<std::string> Tokenizer::TokenText(std::int32_t id) const {
  if (const AddedToken* added = added_.FindById(id)) return added->content;
  if (const std::string* token = model_->IdToToken(id)) return *token;
  return std::nullopt;
}

bool Tokenizer::IsSpecial(std::int32_t id) const {
  const AddedToken* added = added_.FindById(id);
  return added != nullptr && added->special;
}

std::optional<std::string> Tokenizer::TokenBytes(std::int32_t id, bool first) const {
  std::optional<std::string> text = TokenText(id);
  if (!text) return std::nullopt;
  return decoder_.Decode(*text, first);
}

std::string Tokenizer::Decode(absl::Span<const std::int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  bool first = true;
  for (const std::int32_t id : ids) {
    if (skip_special_tokens && IsSpecial(id)) continue;
    std::optional<std::string> token = TokenBytes(id, first);
    if (!token) continue;
    bytes += *token;
    first = false;
  }
  return ToValidUtf8(StripWholeText(std::move(bytes), text_strip(), true, true));
}

std::string StripWholeText(std::string text, const TokenDecoder::TextStrip& strip, bool at_start,
                           bool at_end) {
  if (strip.content.empty()) return text;
  const std::size_t width = strip.content.size();
  if (at_start) {
    std::size_t begin = 0;
    for (int i = 0; i < strip.start && text.compare(begin, width, strip.content) == 0; ++i) {
      begin += width;
    }
    text.erase(0, begin);
  }
  if (at_end) {
    for (int i = 0; i < strip.stop && text.size() >= width &&
                    text.compare(text.size() - width, width, strip.content) == 0;
         ++i) {
      text.erase(text.size() - width);
    }
  }
  return text;
}

}  // namespace placer::tokenizer
