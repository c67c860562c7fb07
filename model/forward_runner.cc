#include "model/forward_runner.h"

#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include "absl/strings/str_cat.h"

namespace placer::model {

absl::StatusOr<Logits> DecoderOnlyModel::Forward(const std::vector<int32_t>& token_ids,
                                                 bool all_positions) const {
  if (token_ids.empty()) return absl::InvalidArgumentError("token_ids: empty");
  if (static_cast<int64_t>(token_ids.size()) > config_.max_position_embeddings) {
    return absl::InvalidArgumentError(
        absl::StrCat("token_ids: ", token_ids.size(), " positions, the model allows at most ",
                     config_.max_position_embeddings));
  }
  for (size_t i = 0; i < token_ids.size(); ++i) {
    if (token_ids[i] < 0 || token_ids[i] >= config_.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token_ids[", i, "]: ", token_ids[i], " is outside the vocabulary [0, ",
                       config_.vocab_size, ")"));
    }
  }
  try {
    c10::InferenceMode inference;
    const at::Tensor tokens =
        at::tensor(std::vector<int64_t>(token_ids.begin(), token_ids.end()), at::kLong);
    at::Tensor logits = Run(tokens);
    if (!all_positions) logits = logits.slice(0, logits.size(0) - 1);
    logits = logits.to(at::kFloat).contiguous();
    Logits out;
    out.shape = {logits.size(0), logits.size(1)};
    const float* data = logits.data_ptr<float>();
    out.values.assign(data, data + logits.numel());
    return out;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("forward pass failed: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("forward pass failed: ", e.what()));
  }
}

}  // namespace placer::model
