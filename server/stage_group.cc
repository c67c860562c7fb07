#include "server/stage_group.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/architectures/architecture.h"
#include "placement/checkpoint_tensors.h"
#include "placement/cuda_probe.h"
#include "placement/device_inventory.h"
#include "placement/device_map.h"

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

// What the leader needs to plan this node as `placer plan --nodes` would: its devices as a
// --devices string (a probed node's as it probed them: free bytes now) and the flags that
// size its budgets and offload.
absl::StatusOr<json> NodeOptions(const placement::PlacementOptions& placement) {
  std::string devices = placement.devices;
  if (devices.empty()) {
    placement::InventoryOptions inventory;
    inventory.gpu_probe = placement.gpu_probe;
    inventory.offload_dir = placement.offload_dir;
    inventory.meminfo_path = placement.meminfo_path;
    PLACER_ASSIGN_OR_RETURN(std::vector<placement::DeviceInfo> probed,
                            placement::ProbeDevices(inventory));
    for (const placement::DeviceInfo& device : probed) {
      absl::StrAppend(&devices, devices.empty() ? "" : ",", device.device.Name(), "=",
                      device.free_bytes);
    }
  }
  return json{{"devices", devices},
              {"max_memory", placement.max_memory},
              {"gpu_memory_utilization", placement.gpu_memory_utilization},
              {"offload_dir", placement.offload_dir},
              {"offload_exec", placement.offload_exec},
              {"prefetch", placement.prefetch}};
}

// A rank's node as the leader plans it: the leader's flags (equal on every rank, checked)
// with the node's own devices and budgets.
placement::PlacementOptions NodePlacement(const placement::PlacementOptions& leader, const json& node) {
  placement::PlacementOptions options = leader;
  options.gpu_probe = nullptr;  // the node's devices are in its string
  options.devices = node.value("devices", "");
  options.max_memory = node.value("max_memory", "");
  options.gpu_memory_utilization = node.value("gpu_memory_utilization", leader.gpu_memory_utilization);
  options.offload_dir = node.value("offload_dir", "");
  options.offload_exec = node.value("offload_exec", leader.offload_exec);
  options.prefetch = node.value("prefetch", leader.prefetch);
  return options;
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
  PLACER_ASSIGN_OR_RETURN(json node, NodeOptions(placement));
  return json{{"same", same}, {"node", node}};
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

// Every rank: this rank's share of the leader's cut, with the device map the leader made
// for it, validated over this node's own devices (budgets, reserves) and loaded as it is.
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
  absl::StatusOr<placement::DeviceMap> map = placement::ParseDeviceMapJson(
      cut["maps"][static_cast<size_t>(stages.rank)].get<std::string>(),
      absl::StrCat("the leader's device map for ", RankName(stages.rank)));
  if (leader_layers != json{share->first_layer, share->end_layer}) {
    plan = absl::FailedPreconditionError(absl::StrCat(
        RankName(stages.rank), ": the leader cut decoder layers ", leader_layers.dump(),
        " for it, but it cuts [", share->first_layer, ",", share->end_layer, ")"));
  } else if (!map.ok()) {
    plan = map.status();
  } else {
    placement::PlanCommandArgs args;
    args.checkpoint_dir = model_dir;
    args.placement = placement;
    args.device_map = *std::move(map);
    spdlog::info("{}: validates and loads the leader's device map for its share: {}",
                 RankName(stages.rank), cut["maps"][static_cast<size_t>(stages.rank)].get<std::string>());
    plan = placement::PlanStage(args, *share);
    if (!plan.ok()) {
      plan = absl::Status(plan.status().code(),
                          absl::StrCat("the leader's device map does not fit ", RankName(stages.rank),
                                       "'s devices: ", plan.status().message()));
    }
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
    std::vector<placement::PlacementOptions> nodes = {NodePlacement(placement, inventory["node"])};
    for (int rank = 1; rank < stages.stages && refused.empty(); ++rank) {
      PLACER_ASSIGN_OR_RETURN(json other, ReadJson(store, absl::StrCat("rank/", rank, "/inventory"),
                                                   stages.rendezvous_timeout));
      refused = Difference(rank, inventory, other);
      nodes.push_back(NodePlacement(placement, other.value("node", json::object())));
    }
    json cut;
    if (refused.empty()) {
      // The leader plans over all of them, as `placer plan --nodes` does for these devices.
      placement::PlanCommandArgs args;
      args.checkpoint_dir = model_dir;
      args.placement = placement;
      absl::StatusOr<std::vector<placement::NodePlan>> group = placement::PlanGroup(args, nodes);
      if (!group.ok()) refused = std::string(group.status().message());
      if (group.ok()) {
        for (const placement::NodePlan& node : *group) {
          cut["capacities"].push_back(node.capacity_bytes);
          cut["layers"].push_back({node.share.first_layer, node.share.end_layer});
          // As text: the map's order (execution order) survives, which json's objects sort.
          cut["maps"].push_back(placement::DeviceMapToJson(node.plan.device_map).dump());
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
