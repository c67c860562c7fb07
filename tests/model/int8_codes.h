// 8-bit packed weights for the tests of the kernels over them (quantized_int8_bf16_test.cc,
// quantized_int8_digits_test.cc): --quantize int8's packing with offsets as zero points store
// them, and every code value at every position.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>

#include "loader/quantized_weight.h"
#include "model/packed_block_header.h"
#include "tests/model/seeded_tensors.h"

namespace placer::model::int8_codes {

// --quantize int8's packing of random weights (symmetric: every offset 0), then, when
// `with_offsets`, each block's offset set to a random multiple of its scale (m = -z·s, as a zero
// point z stores it) so a kernel's offset term is exercised.
inline at::Tensor Pack(int64_t out, int64_t in, int64_t group, int seed, bool with_offsets) {
  const at::Tensor w = SeededRandn({out, in}, seed);
  const loader::PackedLayout layout{8, out, in, group};
  absl::StatusOr<at::Tensor> packed = loader::QuantizeLinearWeight(w, layout, "w");
  EXPECT_TRUE(packed.ok()) << packed.status();
  if (!with_offsets) return *packed;
  const at::Tensor zero_points = SeededRandn({out * (in / group)}, seed + 1).mul(40).round();
  auto* bytes = static_cast<uint8_t*>(packed->data_ptr());
  for (int64_t b = 0; b < out * (in / group); ++b) {
    uint8_t* block = bytes + b * layout.block_bytes();
    const float offset = -zero_points[b].item<float>() * BlockScale(block);
    std::memcpy(block + sizeof(float), &offset, sizeof(float));
  }
  return *packed;
}

// Every int8 code in order, repeated along each row, with the block's scale and offset kept.
inline at::Tensor WithEveryCode(at::Tensor packed, int64_t out, int64_t in, int64_t group) {
  const int64_t block_bytes = loader::PackedLayout{8, out, in, group}.block_bytes();
  auto* bytes = static_cast<uint8_t*>(packed.data_ptr());
  for (int64_t b = 0; b < out * (in / group); ++b) {
    for (int64_t i = 0; i < group; ++i) {
      bytes[b * block_bytes + loader::kPackedBlockHeaderBytes + i] =
          static_cast<uint8_t>((b * 7 + i) % 256);
    }
  }
  return packed;
}

}  // namespace placer::model::int8_codes
