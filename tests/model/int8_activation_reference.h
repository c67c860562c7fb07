// The float64 product --quantize-activations int8 must match (model/quantized_vnni.h,
// model/int8_activation_tiles.h): activations quantized per block as the kernels document it,
// the weights' codes, scales and offsets decoded here from the packed bytes as
// loader/quantized_layout.h documents them (not by the loader's code).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "loader/quantized_weight.h"
#include "tests/model/seeded_tensors.h"

namespace placer::model {

inline at::Tensor PackRandomWeight(int64_t out, int64_t in, int64_t group, int seed, int bits = 4) {
  const loader::PackedLayout layout{bits, out, in, group};
  absl::StatusOr<at::Tensor> packed = loader::QuantizeLinearWeight(SeededRandn({out, in}, seed), layout, "w");
  EXPECT_TRUE(packed.ok()) << packed.status();
  return *packed;
}

// y = sum over groups g and activation blocks b (32 inputs for groups of 32, else 128) of
// s_g * d_b * (q . codes) + m_g * sum_g(x), in float64, with |terms| summed for the tolerance.
inline void Int8ActivationReference(const at::Tensor& x, const at::Tensor& packed, const at::Tensor& bias,
                                    std::vector<double>* y, std::vector<double>* magnitude) {
  const loader::PackedLayout layout = *loader::PackedLayoutOf(packed);
  const int64_t rows = x.size(0), in = layout.in, out = layout.out, gs = layout.group_size;
  const at::Tensor xc = x.contiguous();
  const float* xs = xc.data_ptr<float>();
  const uint8_t* bytes = static_cast<const uint8_t*>(packed.data_ptr());
  y->assign(static_cast<size_t>(rows * out), 0);
  magnitude->assign(static_cast<size_t>(rows * out), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t ab = std::min<int64_t>(gs, 128);  // the activation block: 32, 64 or 128
    std::vector<int> codes(static_cast<size_t>(in));
    std::vector<double> scales(static_cast<size_t>(in / ab));
    for (int64_t b = 0; b < in / ab; ++b) {
      float max_abs = 0;
      for (int64_t c = 0; c < ab; ++c) max_abs = std::max(max_abs, std::fabs(xs[r * in + b * ab + c]));
      scales[b] = max_abs / 127.0f;
      const float inverse = max_abs > 0 ? 127.0f / max_abs : 0.0f;
      for (int64_t c = 0; c < ab; ++c) {
        codes[b * ab + c] = static_cast<int>(std::nearbyint(xs[r * in + b * ab + c] * inverse));
      }
    }
    for (int64_t n = 0; n < out; ++n) {
      double sum = bias.defined() ? bias[n].item<float>() : 0.0, mag = std::fabs(sum);
      for (int64_t g = 0; g < layout.groups(); ++g) {
        const uint8_t* block = bytes + (n * layout.groups() + g) * layout.block_bytes();
        float s, m;
        std::memcpy(&s, block, 4);
        std::memcpy(&m, block + 4, 4);
        const uint8_t* payload = block + 8;
        double x_sum = 0;
        for (int64_t c = 0; c < gs; ++c) x_sum += xs[r * in + g * gs + c];
        sum += m * x_sum;
        mag += std::fabs(m * x_sum);
        for (int64_t b = 0; b < gs / ab; ++b) {
          int64_t dot = 0, dot_abs = 0;
          for (int64_t c = b * ab; c < (b + 1) * ab; ++c) {
            const uint8_t byte = layout.bits == 8 ? payload[c] : payload[(c / 32) * 16 + (c % 32) % 16];
            const int q = layout.bits == 8 ? static_cast<int8_t>(byte) : (c % 32) < 16 ? (byte & 0xF) : (byte >> 4);
            dot += q * codes[g * gs + c];
            dot_abs += std::abs(q * codes[g * gs + c]);
          }
          const double d = scales[(g * gs) / ab + b];
          sum += double(s) * d * double(dot);
          mag += std::fabs(double(s) * d) * double(dot_abs);
        }
      }
      (*y)[r * out + n] = sum;
      (*magnitude)[r * out + n] = mag;
    }
  }
}

}  // namespace placer::model
