#include "server/model_loading.h"

#include "loader/checkpoint.h"
#include "model/causal_lm.h"

namespace placer::server {

absl::StatusOr<ModelSnapshot> LoadServedModel(const std::string& dir) {
  auto checkpoint = loader::Checkpoint::Open(dir);
  if (!checkpoint.ok()) return checkpoint.status();
  auto model = model::LoadCausalLm(*checkpoint);
  if (!model.ok()) return model.status();

  ModelSnapshot snapshot;
  snapshot.state = ModelState::kReady;
  snapshot.path = dir;
  snapshot.architecture = std::string(loader::ArchitectureName((*checkpoint)->config().architecture));
  snapshot.dtype = std::string(loader::DTypeName((*checkpoint)->dtype()));
  snapshot.parameter_count = static_cast<uint64_t>((*checkpoint)->parameter_count());
  snapshot.has_tokenizer = (*checkpoint)->has_tokenizer();
  snapshot.model = std::move(*model);
  return snapshot;
}

}  // namespace placer::server
