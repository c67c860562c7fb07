// What the runtime needs of a plan to enforce it: where each module's weights live, where
// offloaded blocks run, and how devices are backed. Torch-free so the server can build it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "loader/quantized_layout.h"
#include "placement/device.h"
#include "placement/plan.h"

namespace placer::runtime {

// The planner's words, used unqualified by the run time.
using placement::Device;
using placement::DeviceKind;

struct RuntimePlan {
  // Module (or tensor) name -> device, as the plan or the user's map writes it. A tensor goes
  // where its longest matching prefix (at a dot boundary) says; "" matches everything.
  std::vector<std::pair<std::string, Device>> device_map;
  Device execution_device = Device::Cpu();  // where blocks on cpu/disk run
  // GPUs backed by host memory (--devices): the same hooks and copies, CPU kernels.
  bool virtual_gpus = false;
  // Stage block i+1 while block i computes. Off: stage when a block is entered.
  bool prefetch = true;
  // Buffers on the execution device that staged blocks are copied into: 2, or 1 where the
  // plan found room for one only (then prefetch is off).
  int staging_slots = 2;
  std::string offload_dir;  // where converted copies of disk tensors are written
  // --quantize: decoder-layer linear weights packed at load (BlockTensor::linear).
  loader::QuantizeOptions quantize;
  // Blocks (modules, e.g. "model.layers.5") that other pipeline stages run: never bound here;
  // the pipeline hook carries the activations across them.
  std::vector<std::string> other_stage_blocks;

  // Everything on the CPU: what a caller gets with no plan at all.
  static RuntimePlan AllOnCpu();
  // The plan's device map, execution device and sizing (virtual GPUs, prefetch, offload dir).
  static RuntimePlan FromPlan(const placement::Plan& plan);

  // The device of one tensor; an error naming it when the map does not cover it.
  absl::StatusOr<Device> DeviceOf(const std::string& tensor_name) const;
};

}  // namespace placer::runtime
