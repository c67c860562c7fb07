// A packed block's header (loader/quantized_layout.h: float32 scale s, float32 offset m, then
// the codes; w = fma(q, s, m)), as every packed kernel reads it: the fields sit at any byte
// offset, so they are copied out, never dereferenced as floats.
#pragma once

#include <cstdint>
#include <cstring>

namespace placer::model {

inline float BlockScale(const uint8_t* block) {
  float scale;
  std::memcpy(&scale, block, sizeof(float));
  return scale;
}

inline float BlockOffset(const uint8_t* block) {
  float offset;
  std::memcpy(&offset, block + sizeof(float), sizeof(float));
  return offset;
}

}  // namespace placer::model
