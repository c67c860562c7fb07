// Writes small real checkpoints for tests with the same code the
// placer-make-checkpoint tool uses.
#pragma once

#include <cstdint>
#include <string>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "loader/checkpoint_writer.h"
#include "loader/random_fill.h"

namespace placer::loader::testing {

inline CheckpointSpec TinySpec(const std::string& arch, DType dtype = DType::kF32) {
  CheckpointSpec spec = *PresetSpec(arch, "tiny");
  // Smaller than the preset: tests write many of these.
  spec.layers = 2;
  spec.hidden = 32;
  spec.heads = 4;
  spec.kv_heads = arch == "llama" ? 2 : 4;
  spec.intermediate = arch == "llama" ? 48 : 128;
  spec.vocab = 300;
  spec.max_positions = 64;
  spec.dtype = dtype;
  return spec;
}

inline WrittenCheckpoint WriteTestCheckpoint(const std::string& dir, const CheckpointSpec& spec,
                                             std::uint64_t max_shard_bytes = 1ull << 40,
                                             std::uint64_t seed = 7) {
  absl::StatusOr<WrittenCheckpoint> written =
      WriteCheckpoint(dir, spec, max_shard_bytes, MakeRandomFill(seed));
  EXPECT_TRUE(written.ok()) << written.status();
  return written.ok() ? *written : WrittenCheckpoint{};
}

// The values the writer put in `tensor`, regenerated independently of the file.
inline at::Tensor ExpectedValues(const ExpectedTensor& tensor, DType dtype, at::ScalarType type,
                                 std::uint64_t seed = 7) {
  at::Tensor out = at::empty(tensor.shape, at::TensorOptions().dtype(type));
  const absl::Status filled = MakeRandomFill(seed)(tensor, dtype)(
      static_cast<std::uint8_t*>(out.data_ptr()), static_cast<std::size_t>(out.nbytes()));
  EXPECT_TRUE(filled.ok()) << filled;
  return out;
}

}  // namespace placer::loader::testing
