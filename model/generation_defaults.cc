#include "model/generation_defaults.h"

#include "loader/checkpoint.h"

namespace placer::model {
namespace {

template <typename T>
void ReadIfNumber(const nlohmann::json& config, const char* key, T& out) {
  const auto it = config.find(key);
  if (it != config.end() && it->is_number()) out = it->get<T>();
}

}  // namespace

GenerationDefaults ReadGenerationDefaults(const loader::Checkpoint& checkpoint) {
  GenerationDefaults defaults;
  for (int64_t id : checkpoint.config().eos_token_ids) {
    defaults.eos_token_ids.push_back(static_cast<int32_t>(id));
  }
  const nlohmann::json& config = checkpoint.generation_config();
  if (!config.is_object()) return defaults;
  // eos_token_id in generation_config.json overrides config.json's (int or list).
  if (const auto eos = config.find("eos_token_id"); eos != config.end()) {
    std::vector<int32_t> ids;
    if (eos->is_number_integer()) ids.push_back(eos->get<int32_t>());
    if (eos->is_array()) {
      for (const auto& id : *eos) {
        if (id.is_number_integer()) ids.push_back(id.get<int32_t>());
      }
    }
    if (!ids.empty()) defaults.eos_token_ids = ids;
  }
  ReadIfNumber(config, "max_new_tokens", defaults.max_new_tokens);
  const auto do_sample = config.find("do_sample");
  if (do_sample != config.end() && do_sample->is_boolean() && do_sample->get<bool>()) {
    defaults.sampling.temperature = 1.0f;
    defaults.sampling.top_k = 50;  // transformers' GenerationConfig default
    ReadIfNumber(config, "temperature", defaults.sampling.temperature);
    ReadIfNumber(config, "top_k", defaults.sampling.top_k);
    ReadIfNumber(config, "top_p", defaults.sampling.top_p);
  }
  ReadIfNumber(config, "repetition_penalty", defaults.sampling.repetition_penalty);
  return defaults;
}

}  // namespace placer::model
