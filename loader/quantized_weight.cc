#include "loader/quantized_weight.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "loader/huge_page_tensor.h"
#include "loader/quantized_group.h"

namespace placer::loader {
namespace {

// Byte of a 4-bit code inside its block's payload, and whether it is the high nibble.
inline int64_t NibbleByte(int64_t k) { return (k / 32) * 16 + (k % 16); }
inline bool HighNibble(int64_t k) { return (k % 32) >= 16; }

inline void PutHeader(uint8_t* block, float scale, float offset) {
  std::memcpy(block, &scale, sizeof(float));
  std::memcpy(block + sizeof(float), &offset, sizeof(float));
}

}  // namespace

std::optional<PackedLayout> PackedLayoutOf(const at::Tensor& tensor) {
  if (!tensor.defined() || tensor.dim() != 3 || !tensor.is_contiguous()) return std::nullopt;
  int bits = 0;
  if (tensor.scalar_type() == at::kChar) bits = 8;
  if (tensor.scalar_type() == at::kByte) bits = 4;
  if (bits == 0) return std::nullopt;
  const int64_t payload = tensor.size(2) - kPackedBlockHeaderBytes;
  if (payload <= 0) return std::nullopt;
  PackedLayout layout;
  layout.bits = bits;
  layout.out = tensor.size(0);
  layout.group_size = payload * 8 / bits;
  layout.in = tensor.size(1) * layout.group_size;
  if (!ValidatePackedLayout(layout, "").ok()) return std::nullopt;
  return layout;
}

at::Tensor ZeroPackedWeight(const PackedLayout& layout) {
  const at::ScalarType type = layout.bits == 8 ? at::kChar : at::kByte;
  return HugePageZeros({layout.out, layout.groups(), layout.block_bytes()}, type);
}

at::Tensor PackLinearWeight(const at::Tensor& codes, const at::Tensor& scales,
                            const at::Tensor& offsets, const PackedLayout& layout) {
  const at::Tensor q = codes.to(at::kInt).contiguous();
  const at::Tensor s = scales.to(at::kFloat).contiguous();
  const at::Tensor m = offsets.to(at::kFloat).contiguous();
  TORCH_CHECK(q.dim() == 2 && q.size(0) == layout.out && q.size(1) == layout.in,
              "PackLinearWeight: codes must be [out, in]");
  TORCH_CHECK(s.sizes() == m.sizes() && s.dim() == 2 && s.size(0) == layout.out &&
                  s.size(1) == layout.groups(),
              "PackLinearWeight: scales and offsets must be [out, groups]");
  at::Tensor packed = ZeroPackedWeight(layout);
  uint8_t* base = static_cast<uint8_t*>(packed.data_ptr());
  const int32_t* qp = q.data_ptr<int32_t>();
  const float* sp = s.data_ptr<float>();
  const float* mp = m.data_ptr<float>();
  const int64_t groups = layout.groups(), in = layout.in;
  const int64_t row_bytes = groups * layout.block_bytes();
  at::parallel_for(0, layout.out, 16, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      PackLinearRow(qp + n * in, sp + n * groups, mp + n * groups, layout, base + n * row_bytes);
    }
  });
  return packed;
}

void PackLinearRow(const int32_t* codes, const float* scales, const float* offsets,
                   const PackedLayout& layout, uint8_t* row) {
  const int64_t gs = layout.group_size;
  for (int64_t g = 0; g < layout.groups(); ++g) {
    uint8_t* block = row + g * layout.block_bytes();
    PutHeader(block, scales[g], offsets[g]);
    uint8_t* payload = block + kPackedBlockHeaderBytes;
    const int32_t* group = codes + g * gs;
    if (layout.bits == 8) {
      for (int64_t k = 0; k < gs; ++k) payload[k] = static_cast<uint8_t>(static_cast<int8_t>(group[k]));
    } else {
      for (int64_t k = 0; k < gs; ++k) {
        payload[NibbleByte(k)] |= static_cast<uint8_t>((group[k] & 0xF) << (HighNibble(k) ? 4 : 0));
      }
    }
  }
}

namespace {

// Rows converted to float32 at a time by a task: a few hundred KiB of scratch per thread.
constexpr int64_t kRowsPerConversion = 8;

}  // namespace

absl::StatusOr<at::Tensor> QuantizeLinearWeight(const at::Tensor& weight,
                                                const PackedLayout& layout,
                                                const std::string& tensor) {
  if (weight.dim() != 2 || weight.size(0) != layout.out || weight.size(1) != layout.in) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quantizing ", tensor, ": expected a [", layout.out, ", ", layout.in, "] weight"));
  }
  if (!weight.device().is_cpu()) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantizing ", tensor, ": the weight must be in host memory to be packed"));
  }
  // Row by row, straight into the packed tensor: the tensor formulas this replaces made six
  // float32 or int32 copies of the whole weight, and on a ~1.1B model the page faults of those
  // fresh buffers took most of the ~50 s that --quantize added to a load (bench/analysis.md).
  at::Tensor packed = ZeroPackedWeight(layout);
  uint8_t* base = static_cast<uint8_t*>(packed.data_ptr());
  const bool direct = weight.scalar_type() == at::kFloat && weight.is_contiguous();
  const bool bf16 = weight.scalar_type() == at::kBFloat16 && weight.is_contiguous();
  const int64_t in = layout.in, gs = layout.group_size, groups = layout.groups();
  at::parallel_for(0, layout.out, kRowsPerConversion, [&](int64_t n0, int64_t n1) {
    std::vector<int32_t> codes(static_cast<size_t>(gs));
    std::vector<float> rows;
    for (int64_t r0 = n0; r0 < n1; r0 += kRowsPerConversion) {
      const int64_t count = std::min(kRowsPerConversion, n1 - r0);
      const float* x = nullptr;
      if (direct) {
        x = weight.data_ptr<float>() + r0 * in;
      } else if (bf16) {
        // BF16 is float32's upper half (most checkpoints on the Hub): widened by a shift in a
        // loop the compiler vectorizes, without copy_'s per-call dispatch (a ~1.1B load went
        // from 3.8-6.1 s to 3.0-5.1 s with this).
        rows.resize(static_cast<size_t>(count * in));
        const uint16_t* source = static_cast<const uint16_t*>(weight.data_ptr()) + r0 * in;
        for (int64_t i = 0; i < count * in; ++i) {
          const uint32_t bits = static_cast<uint32_t>(source[i]) << 16;
          std::memcpy(&rows[static_cast<size_t>(i)], &bits, sizeof(float));
        }
        x = rows.data();
      } else {
        // Any dtype and strides (a transposed [in, out] weight) through ATen's conversion.
        rows.resize(static_cast<size_t>(count * in));
        at::from_blob(rows.data(), {count, in}, at::kFloat).copy_(weight.narrow(0, r0, count));
        x = rows.data();
      }
      for (int64_t r = 0; r < count; ++r) {
        for (int64_t g = 0; g < groups; ++g) {
          QuantizeGroup(x + r * in + g * gs, gs, layout.bits, codes.data(),
                        base + ((r0 + r) * groups + g) * layout.block_bytes());
        }
      }
    }
  });
  return packed;
}

namespace {

// One row's blocks, written so that the compiler vectorizes each block (with the target's
// FMA, the same fused rounding as the kernels).
template <typename T>
inline __attribute__((always_inline)) void DequantizeRow(const PackedLayout& layout,
                                                         const uint8_t* row_blocks, T* row) {
  const int64_t gs = layout.group_size;
  for (int64_t g = 0; g < layout.groups(); ++g) {
    const uint8_t* block = row_blocks + g * layout.block_bytes();
    float scale, offset;
    std::memcpy(&scale, block, sizeof(float));
    std::memcpy(&offset, block + sizeof(float), sizeof(float));
    const uint8_t* payload = block + kPackedBlockHeaderBytes;
    T* out = row + g * gs;
    if (layout.bits == 8) {
      for (int64_t k = 0; k < gs; ++k) {
        out[k] = static_cast<T>(__builtin_fmaf(static_cast<float>(static_cast<int8_t>(payload[k])),
                                               scale, offset));
      }
      continue;
    }
    for (int64_t c = 0; c < gs; c += 32) {
      const uint8_t* bytes = payload + c / 2;
      for (int j = 0; j < 16; ++j) {
        out[c + j] = static_cast<T>(__builtin_fmaf(static_cast<float>(bytes[j] & 0xF), scale, offset));
        out[c + 16 + j] = static_cast<T>(__builtin_fmaf(static_cast<float>(bytes[j] >> 4), scale, offset));
      }
    }
  }
}

template <typename T>
__attribute__((target("avx2,fma"))) void DequantizeRowsFma(const PackedLayout& layout,
                                                          const uint8_t* base, T* w, int64_t n0,
                                                          int64_t n1) {
  for (int64_t n = n0; n < n1; ++n) {
    DequantizeRow(layout, base + n * layout.groups() * layout.block_bytes(), w + n * layout.in);
  }
}

template <typename T>
void DequantizeRowsPlain(const PackedLayout& layout, const uint8_t* base, T* w, int64_t n0,
                         int64_t n1) {
  for (int64_t n = n0; n < n1; ++n) {
    DequantizeRow(layout, base + n * layout.groups() * layout.block_bytes(), w + n * layout.in);
  }
}

template <typename T>
void DequantizeRowRange(const PackedLayout& layout, const uint8_t* base, T* w, int64_t n0,
                        int64_t n1) {
  static const bool fma = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  if (fma) {
    DequantizeRowsFma(layout, base, w, n0, n1);
  } else {
    DequantizeRowsPlain(layout, base, w, n0, n1);
  }
}

template <typename T>
void DequantizeRows(const PackedLayout& layout, const uint8_t* base, T* w) {
  at::parallel_for(0, layout.out, 16, [&](int64_t n0, int64_t n1) {
    DequantizeRowRange(layout, base, w, n0, n1);
  });
}

}  // namespace

at::Tensor DequantizeLinearWeight(const at::Tensor& packed, at::ScalarType dtype,
                                  at::Tensor* out) {
  const std::optional<PackedLayout> found = PackedLayoutOf(packed);
  TORCH_CHECK(found.has_value() && packed.device().is_cpu(),
              "DequantizeLinearWeight: not a packed weight in host memory");
  const PackedLayout& layout = *found;
  const at::ScalarType direct = dtype == at::kBFloat16 ? at::kBFloat16 : at::kFloat;
  at::Tensor local;
  at::Tensor& result = out != nullptr ? *out : local;
  if (!result.defined() || result.scalar_type() != direct) {
    result = at::empty({layout.out, layout.in}, at::TensorOptions().dtype(direct));
  } else {
    result.resize_({layout.out, layout.in});
  }
  const uint8_t* base = static_cast<const uint8_t*>(packed.data_ptr());
  if (direct == at::kBFloat16) {
    // c10::BFloat16 from float rounds to nearest even, as Tensor::to does.
    DequantizeRows(layout, base, result.data_ptr<at::BFloat16>());
  } else {
    DequantizeRows(layout, base, result.data_ptr<float>());
  }
  return direct == dtype ? result : result.to(dtype);
}

void DequantizeLinearWeightRows(const at::Tensor& packed, at::Tensor& out, int64_t n0, int64_t n1) {
  const std::optional<PackedLayout> layout = PackedLayoutOf(packed);
  TORCH_CHECK(layout.has_value() && packed.device().is_cpu() && out.is_contiguous() &&
                  out.dim() == 2 && out.size(0) == layout->out && out.size(1) == layout->in &&
                  0 <= n0 && n0 <= n1 && n1 <= layout->out,
              "DequantizeLinearWeightRows: bad operands");
  const uint8_t* base = static_cast<const uint8_t*>(packed.data_ptr());
  if (out.scalar_type() == at::kBFloat16) {
    DequantizeRowRange(*layout, base, out.data_ptr<at::BFloat16>(), n0, n1);
  } else {
    DequantizeRowRange(*layout, base, out.data_ptr<float>(), n0, n1);
  }
}

at::Tensor DequantizeLinearWeightOnDevice(const at::Tensor& packed, at::ScalarType dtype) {
  const std::optional<PackedLayout> found = PackedLayoutOf(packed);
  TORCH_CHECK(found.has_value(), "DequantizeLinearWeightOnDevice: not a packed weight");
  const PackedLayout& layout = *found;
  const at::Tensor bytes = packed.view(at::kByte);
  // [out, groups, 2] float32 scale and offset, from the blocks' first 8 bytes.
  const at::Tensor header =
      bytes.narrow(2, 0, kPackedBlockHeaderBytes).contiguous().view(at::kFloat);
  const at::Tensor payload = bytes.narrow(2, kPackedBlockHeaderBytes, layout.block_bytes() -
                                                                         kPackedBlockHeaderBytes);
  at::Tensor codes;
  if (layout.bits == 8) {
    codes = payload.contiguous().view(at::kChar).to(at::kFloat);
  } else {
    // Each 16 bytes: inputs 0-15 in the low nibbles, 16-31 in the high ones.
    const at::Tensor runs = payload.contiguous().view({layout.out, layout.groups(), -1, 16}).to(at::kInt);
    codes = at::cat({runs.bitwise_and(0xF), runs.bitwise_right_shift(4)}, -1)
                .view({layout.out, layout.groups(), layout.group_size})
                .to(at::kFloat);
  }
  const at::Tensor w = codes * header.narrow(2, 0, 1) + header.narrow(2, 1, 1);
  return w.view({layout.out, layout.in}).to(dtype);
}

}  // namespace placer::loader
