#include "server/stage_group.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/architectures/architecture.h"
#include "placement/checkpoint_tensors.h"
#include "placement/cuda_probe.h"

namespace placer::server {
namespace {

using nlohmann::json;

std::string RankName(int rank) { return absl::StrCat("rank ", rank, " (stage ", rank, ")"); }

absl::StatusOr<json> ReadJson(runtime::StageLink& link, const std::string& key,
                              std::chrono::milliseconds timeout) {
  PLACER_ASSIGN_OR_RETURN(std::string text, link.Read(key, timeout));
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous: ", key, " is not a JSON object"));
  }
  return value;
}

// What must be equal on every rank, field by field, so a difference can be named.
absl::StatusOr<json> Inventory(const std::string& model_dir,
                               const placement::PlacementOptions& placement) {
  PLACER_ASSIGN_OR_RETURN(placement::CheckpointSummary checkpoint,
                          placement::ReadCheckpointSummary(model_dir));
  uint64_t tensor_bytes = 0;
  for (const placement::TensorSpec& tensor : checkpoint.tensors) {
    uint64_t bytes = loader::DTypeSize(tensor.dtype);
    for (int64_t dim : tensor.shape) bytes *= static_cast<uint64_t>(dim);
    tensor_bytes += bytes;
  }
  const loader::ModelConfig& config = checkpoint.config;
  json same = json::object();
  same["model architecture"] = std::string(loader::ArchitectureName(config.architecture));
  same["model num_hidden_layers"] = config.num_hidden_layers;
  same["model hidden_size"] = config.hidden_size;
  same["model vocab_size"] = config.vocab_size;
  same["model num_attention_heads"] = config.num_attention_heads;
  same["model tensors"] = checkpoint.tensors.size();
  same["model tensor bytes"] = tensor_bytes;
  same["--dtype"] = placement.dtype.empty() ? "auto" : placement.dtype;
  same["--max-seq-len"] = placement.max_seq_len;
  same["--max-batch-size"] = placement.max_batch_size;
  same["--max-batch-total-tokens"] = placement.max_batch_total_tokens;
  PLACER_ASSIGN_OR_RETURN(uint64_t capacity, placement::StageCapacityBytes(placement));
  return json{{"same", same}, {"capacity_bytes", capacity}, {"devices", placement.devices}};
}

// The first field in which `rank`'s inventory differs from the leader's.
std::string Difference(int rank, const json& leader, const json& other) {
  for (const auto& [field, value] : leader["same"].items()) {
    const json theirs = other["same"].value(field, json());
    if (theirs != value) {
      return absl::StrCat(RankName(rank), " differs from the leader in ", field, ": ",
                          theirs.dump(), " there, ", value.dump(), " on the leader");
    }
  }
  return "";
}

json PlanSummary(const placement::Plan& plan, const placement::StageShare& share) {
  json devices = json::array();
  for (const placement::DevicePlan& device : plan.devices) {
    devices.push_back({device.device.Name(), device.total_bytes, device.weights_bytes,
                       device.kv_reserve_bytes});
  }
  json map = json::array();
  for (const auto& [module, device] : placement::StageDeviceMap(plan, share)) {
    map.push_back({module, device.Name()});
  }
  return json{{"compute dtype", std::string(loader::DTypeName(*plan.sizing.compute_dtype))},
              {"KV cache blocks", plan.sizing.kv_cache_blocks},
              {"device_map", map},
              {"devices", devices}};
}

// Every rank: this rank's share of the leader's cut, planned over its own devices.
absl::StatusOr<placement::Plan> PlanOwnShare(runtime::StageLink& link, const StageOptions& stages,
                                             const std::string& model_dir,
                                             const placement::PlacementOptions& placement,
                                             const json& cut, placement::StageShare* share) {
  std::vector<uint64_t> capacities = cut["capacities"].get<std::vector<uint64_t>>();
  PLACER_ASSIGN_OR_RETURN(std::vector<placement::StageShare> shares,
                          placement::SplitStages(model_dir, capacities));
  *share = shares[static_cast<size_t>(stages.rank)];
  const json& leader_layers = cut["layers"][static_cast<size_t>(stages.rank)];
  absl::StatusOr<placement::Plan> plan;
  if (leader_layers != json{share->first_layer, share->end_layer}) {
    plan = absl::FailedPreconditionError(absl::StrCat(
        RankName(stages.rank), ": the leader cut decoder layers ", leader_layers.dump(),
        " for it, but it cuts [", share->first_layer, ",", share->end_layer, ")"));
  } else {
    placement::PlanCommandArgs args;
    args.checkpoint_dir = model_dir;
    args.placement = placement;
    plan = placement::PlanStage(args, *share);
  }
  const json published = plan.ok() ? PlanSummary(*plan, *share)
                                   : json{{"error", std::string(plan.status().message())}};
  PLACER_RETURN_IF_ERROR(link.Publish(absl::StrCat("rank/", stages.rank, "/plan"), published.dump()));
  return plan;
}

// The leader's store goes when the leader exits: it waits (briefly) until every worker read
// its refusal, so each one can say why it stops.
void AwaitRefusalSeen(runtime::StageLink& link) {
  for (int rank = 1; rank < link.size(); ++rank) {
    (void)link.Read(absl::StrCat("rank/", rank, "/refusal-seen"), std::chrono::seconds(5));
  }
}

absl::Status WorkerRefused(runtime::StageLink& link, const std::string& refused) {
  (void)link.Publish(absl::StrCat("rank/", link.rank(), "/refusal-seen"), "1");
  return absl::FailedPreconditionError(absl::StrCat("the leader refused the group: ", refused));
}

}  // namespace

absl::StatusOr<StageAssignment> JoinStageGroup(const StageOptions& stages,
                                               const std::string& model_dir,
                                               const placement::PlacementOptions& placement_flags) {
  placement::PlacementOptions placement = placement_flags;
  placement.gpu_probe = placement::CudaGpuProbe();
  PLACER_ASSIGN_OR_RETURN(json inventory, Inventory(model_dir, placement));
  runtime::StageLinkOptions link_options{stages.rendezvous, stages.rank, stages.stages,
                                         stages.listen, stages.timeout, stages.rendezvous_timeout};
  spdlog::info("{}: joining the group of {} at {} (Gloo on {})",
               runtime::StageLink::StageName(stages.rank, stages.stages), stages.stages,
               stages.rendezvous, stages.listen);
  PLACER_ASSIGN_OR_RETURN(std::unique_ptr<runtime::StageLink> link,
                          runtime::StageLink::Connect(link_options));
  StageAssignment assignment;
  assignment.link = std::move(link);
  runtime::StageLink& store = *assignment.link;
  PLACER_RETURN_IF_ERROR(store.Publish(absl::StrCat("rank/", stages.rank, "/inventory"), inventory.dump()));

  if (stages.rank == 0) {
    std::string refused;
    json capacities = json::array({inventory["capacity_bytes"]});
    for (int rank = 1; rank < stages.stages && refused.empty(); ++rank) {
      PLACER_ASSIGN_OR_RETURN(json other, ReadJson(store, absl::StrCat("rank/", rank, "/inventory"),
                                                   stages.rendezvous_timeout));
      refused = Difference(rank, inventory, other);
      capacities.push_back(other["capacity_bytes"]);
    }
    json cut;
    if (refused.empty()) {
      auto shares = placement::SplitStages(model_dir, capacities.get<std::vector<uint64_t>>());
      if (!shares.ok()) refused = std::string(shares.status().message());
      cut["capacities"] = capacities;
      if (shares.ok()) {
        for (const placement::StageShare& share : *shares) {
          cut["layers"].push_back({share.first_layer, share.end_layer});
        }
      }
    }
    if (!refused.empty()) cut = json{{"refused", refused}};
    PLACER_RETURN_IF_ERROR(store.Publish("group/cut", cut.dump()));
    if (!refused.empty()) {
      AwaitRefusalSeen(store);
      return absl::FailedPreconditionError(absl::StrCat("rendezvous refused: ", refused));
    }
  }

  PLACER_ASSIGN_OR_RETURN(json cut, ReadJson(store, "group/cut", stages.rendezvous_timeout));
  if (cut.contains("refused")) return WorkerRefused(store, cut["refused"].get<std::string>());
  absl::StatusOr<placement::Plan> plan =
      PlanOwnShare(store, stages, model_dir, placement, cut, &assignment.share);

  if (stages.rank == 0) {
    std::string refused = plan.ok() ? "" : std::string(plan.status().message());
    const json mine = plan.ok() ? PlanSummary(*plan, assignment.share) : json::object();
    for (int rank = 0; rank < stages.stages && refused.empty(); ++rank) {
      PLACER_ASSIGN_OR_RETURN(json other, ReadJson(store, absl::StrCat("rank/", rank, "/plan"),
                                                   stages.rendezvous_timeout));
      if (other.contains("error")) {
        refused = other["error"].get<std::string>();
        break;
      }
      for (const char* field : {"compute dtype", "KV cache blocks"}) {
        if (other[field] != mine[field]) {
          refused = absl::StrCat(RankName(rank), "'s plan differs from the leader's in ", field, ": ",
                                 other[field].dump(), " there, ", mine[field].dump(), " on the leader");
          break;
        }
      }
      for (const auto& entry : other["device_map"]) {
        assignment.group_device_map.emplace_back(
            entry[0].get<std::string>(), absl::StrCat("node", rank, ":", entry[1].get<std::string>()));
      }
      for (const auto& device : other["devices"]) {
        assignment.group_devices.push_back({rank, device[0].get<std::string>(),
                                            device[1].get<uint64_t>(), device[2].get<uint64_t>(),
                                            device[3].get<uint64_t>()});
      }
    }
    PLACER_RETURN_IF_ERROR(store.Publish("group/plans", json{{"refused", refused}}.dump()));
    if (!refused.empty()) {
      AwaitRefusalSeen(store);
      return absl::FailedPreconditionError(absl::StrCat("rendezvous refused: ", refused));
    }
  } else {
    PLACER_ASSIGN_OR_RETURN(json verdict, ReadJson(store, "group/plans", stages.rendezvous_timeout));
    const std::string refused = verdict.value("refused", "");
    if (!refused.empty()) return WorkerRefused(store, refused);
  }
  if (!plan.ok()) return plan.status();
  assignment.plan = *std::move(plan);
  return assignment;
}

absl::Status AwaitGroupLoaded(runtime::StageLink& link, std::chrono::milliseconds timeout) {
  PLACER_RETURN_IF_ERROR(link.Publish(absl::StrCat("rank/", link.rank(), "/loaded"), "1"));
  for (int rank = 0; rank < link.size(); ++rank) {
    absl::StatusOr<std::string> loaded = link.Read(absl::StrCat("rank/", rank, "/loaded"), timeout);
    if (!loaded.ok()) {
      return absl::UnavailableError(absl::StrCat(runtime::StageLink::StageName(rank, link.size()),
                                                 " did not load within ", timeout.count(), "ms"));
    }
  }
  return absl::OkStatus();
}

size_t BoundaryBlock(const placement::StageShare& leader_share) {
  // The leader's blocks come first in execution order up to its last layer; the next block
  // is another stage's.
  return leader_share.first_layer_block + static_cast<size_t>(leader_share.end_layer) - 1;
}

}  // namespace placer::server
