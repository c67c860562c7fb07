#include "model/tokenizer/special_tokens.h"

#include "absl/strings/str_cat.h"
#include "model/tokenizer/tokenizer_json.h"
#include "base/status_macros.h"

namespace placer::tokenizer {
namespace {

constexpr int kMaxDepth = 16;

constexpr JsonWhere kConfigTop{"tokenizer_config.json", ""};

absl::Status ConfigError(absl::string_view field, absl::string_view why) {
  return placer::JsonError({kConfigTop.file, field}, why);
}

// "bos_token": "<s>" or {"content": "<s>", ...}; nullopt when absent or null.
absl::StatusOr<std::optional<std::string>> ConfigToken(const nlohmann::json& config,
                                                       const char* key) {
  if (!config.is_object()) return std::optional<std::string>();
  const auto found = config.find(key);
  if (found == config.end() || found->is_null()) return std::optional<std::string>();
  if (found->is_string()) return std::optional<std::string>(found->get<std::string>());
  if (found->is_object()) {
    const auto content = found->find("content");
    if (content != found->end() && content->is_string()) {
      return std::optional<std::string>(content->get<std::string>());
    }
  }
  return ConfigError(key, "expected a string or an object with \"content\"");
}

absl::StatusOr<std::optional<bool>> ConfigFlag(const nlohmann::json& config, const char* key) {
  if (!config.is_object() || !config.contains(key) || config[key].is_null()) {
    return std::optional<bool>();
  }
  PLACER_ASSIGN_OR_RETURN(const bool flag, ReadBoolField(config, kConfigTop, key));
  return std::optional<bool>(flag);
}

std::optional<std::int32_t> IdOf(const std::string& token, const AddedTokens& added,
                                 const BpeModel& model) {
  if (const AddedToken* found = added.FindByContent(token)) return found->id;
  return model.TokenToId(token);
}

// The ids of a special-token entry: TemplateProcessing's {"ids": [..]} or Bert's ["[CLS]", 101].
absl::StatusOr<std::vector<std::int32_t>> PairIds(const nlohmann::json& value,
                                                  const std::string& path) {
  if (value.is_array() && value.size() == 2 && value[1].is_number_integer()) {
    const auto id = value[1].get<std::int64_t>();
    if (id < 0 || id > INT32_MAX) return JsonError(path, "id out of range");
    return std::vector<std::int32_t>{static_cast<std::int32_t>(id)};
  }
  return JsonError(path, "expected [\"token\", id]");
}

absl::Status AddFromPostProcessor(const nlohmann::json& value, const std::string& path, int depth,
                                  SpecialTokens* out) {
  if (value.is_null()) return absl::OkStatus();
  if (depth > kMaxDepth) return JsonError(path, "nested too deeply");
  PLACER_ASSIGN_OR_RETURN(auto type, TypeField(value, path));
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "Sequence") {
    PLACER_ASSIGN_OR_RETURN(auto items, ArrayField(value, path, "processors"));
    for (std::size_t i = 0; i < items->size(); ++i) {
      absl::Status status = AddFromPostProcessor(
          (*items)[i], IndexJsonPath(JoinJsonPath(path, "processors"), i), depth + 1, out);
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    PLACER_ASSIGN_OR_RETURN(auto cls,
                            PairIds(value.value("cls", nlohmann::json()), JoinJsonPath(path, "cls")));
    PLACER_ASSIGN_OR_RETURN(auto sep,
                            PairIds(value.value("sep", nlohmann::json()), JoinJsonPath(path, "sep")));
    out->prefix.insert(out->prefix.end(), cls.begin(), cls.end());
    out->suffix.insert(out->suffix.begin(), sep.begin(), sep.end());
    return absl::OkStatus();
  }
  if (type == "TemplateProcessing") {
    PLACER_ASSIGN_OR_RETURN(auto single, ArrayField(value, path, "single"));
    const auto specials = value.find("special_tokens");
    bool after_sequence = false;
    std::vector<std::int32_t> prefix, suffix;
    for (std::size_t i = 0; i < single->size(); ++i) {
      const std::string item_path = IndexJsonPath(JoinJsonPath(path, "single"), i);
      const nlohmann::json& item = (*single)[i];
      if (!item.is_object()) return JsonError(item_path, "expected an object");
      if (item.contains("Sequence")) {
        after_sequence = true;
        continue;
      }
      const auto special = item.find("SpecialToken");
      if (special == item.end() || !special->is_object()) {
        return JsonError(item_path, "expected {\"Sequence\": ..} or {\"SpecialToken\": ..}");
      }
      PLACER_ASSIGN_OR_RETURN(auto name,
                              StringField(*special, JoinJsonPath(item_path, "SpecialToken"), "id"));
      const std::string special_path = JoinJsonPath(JoinJsonPath(path, "special_tokens"), name);
      if (specials == value.end() || !specials->is_object() || !specials->contains(name)) {
        return JsonError(special_path, "missing");
      }
      PLACER_ASSIGN_OR_RETURN(auto ids, ArrayField((*specials)[name], special_path, "ids"));
      for (const nlohmann::json& id : *ids) {
        if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
            id.get<std::int64_t>() > INT32_MAX) {
          return JsonError(JoinJsonPath(special_path, "ids"), "expected non-negative integer ids");
        }
        (after_sequence ? suffix : prefix).push_back(static_cast<std::int32_t>(id.get<std::int64_t>()));
      }
    }
    out->prefix.insert(out->prefix.end(), prefix.begin(), prefix.end());
    out->suffix.insert(out->suffix.begin(), suffix.begin(), suffix.end());
    return absl::OkStatus();
  }
  return JsonError(JoinJsonPath(path, "type"),
                   absl::StrCat("post-processor '", type,
                                "' is not supported (supported: TemplateProcessing, "
                                "BertProcessing, RobertaProcessing, ByteLevel, Sequence)"));
}

}  // namespace

absl::StatusOr<SpecialTokens> ReadSpecialTokens(const nlohmann::json& tokenizer_json,
                                                const nlohmann::json& tokenizer_config,
                                                const AddedTokens& added, const BpeModel& model) {
  SpecialTokens out;
  for (const bool bos : {true, false}) {
    const char* key = bos ? "bos_token" : "eos_token";
    PLACER_ASSIGN_OR_RETURN(auto token, ConfigToken(tokenizer_config, key));
    if (!token.has_value()) continue;
    const std::optional<std::int32_t> id = IdOf(*token, added, model);
    if (!id) {
      return ConfigError(key, absl::StrCat("'", *token, "' is not a token of tokenizer.json"));
    }
    (bos ? out.bos_id : out.eos_id) = id;
  }

  PLACER_ASSIGN_OR_RETURN(auto add_bos, ConfigFlag(tokenizer_config, "add_bos_token"));
  PLACER_ASSIGN_OR_RETURN(auto add_eos, ConfigFlag(tokenizer_config, "add_eos_token"));
  if (add_bos.has_value() || add_eos.has_value()) {
    if (add_bos.value_or(false)) {
      if (!out.bos_id) return ConfigError("add_bos_token", "true, but there is no bos_token");
      out.prefix.push_back(*out.bos_id);
    }
    if (add_eos.value_or(false)) {
      if (!out.eos_id) return ConfigError("add_eos_token", "true, but there is no eos_token");
      out.suffix.push_back(*out.eos_id);
    }
    return out;
  }
  const auto post = tokenizer_json.find("post_processor");
  if (post == tokenizer_json.end()) return out;
  absl::Status status = AddFromPostProcessor(*post, "post_processor", 0, &out);
  if (!status.ok()) return status;
  return out;
}

}  // namespace placer::tokenizer
