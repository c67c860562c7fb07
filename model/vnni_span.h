// What the int8-activation kernels (quantized_vnni.cc, quantized_avx2_int8.cc) share about the
// packed bytes they read: the order in which one load,
// shift and mask unpacks a 64-input span's nibbles (inputs 0-15, 32-47, 16-31, 48-63), which
// the activations of 4-bit weights are stored in so that each vpdpbusd lane multiplies the
// same inputs (8-bit codes are read in input order, and their activations stored so).
#pragma once

#include <cstdint>

namespace placer::model {

// Where input c (0-63) of a 64-input span sits in the unpacked order.
inline int64_t VnniSpanPosition(int64_t c) {
  if (c < 16 || c >= 48) return c;
  return c < 32 ? c + 16 : c - 16;
}

// Where input i of a row's activation codes is stored for weights of `bits` bits: in the
// unpacked order of its span for 4-bit codes, in input order for 8-bit ones (a byte each).
inline int64_t VnniCodePosition(int bits, int64_t i) {
  return bits == 8 ? i : (i / 64) * 64 + VnniSpanPosition(i % 64);
}

}  // namespace placer::model
