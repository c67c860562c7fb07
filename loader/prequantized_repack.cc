#include "loader/prequantized_repack.h"

#include <c10/util/Exception.h>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/quantized_weight.h"

namespace placer::loader {
namespace {

// The `per_word` codes of each int32 along a new last dimension, lowest bits first, as
// non-negative int64: [..., n] -> [..., n, per_word].
at::Tensor UnpackWords(const at::Tensor& words, int bits) {
  const int64_t per_word = 32 / bits;
  const at::Tensor unsigned_words = words.to(at::kLong).bitwise_and(int64_t{0xFFFFFFFF});
  const at::Tensor shifts = at::arange(per_word, at::kLong) * bits;
  return unsigned_words.unsqueeze(-1).bitwise_right_shift(shifts).bitwise_and((int64_t{1} << bits) - 1);
}

// AWQ GEMM's nibble i of a word holds output 8·word + [0, 2, 4, 6, 1, 3, 5, 7][i]; output k
// is in nibble [0, 4, 1, 5, 2, 6, 3, 7][k].
at::Tensor UnpackAwqOutputs(const at::Tensor& words) {
  const at::Tensor nibbles = UnpackWords(words, 4);  // [rows, out/8, 8]
  const at::Tensor order = at::tensor(std::vector<int64_t>{0, 4, 1, 5, 2, 6, 3, 7}, at::kLong);
  return nibbles.index_select(-1, order).reshape({words.size(0), -1});
}

absl::StatusOr<at::Tensor> InputOrder(const Checkpoint& checkpoint,
                                      const QuantizedLinearSource& source) {
  if (source.group_index.empty()) return at::Tensor();
  PLACER_ASSIGN_OR_RETURN(at::Tensor stored, checkpoint.ReadTensor(source.group_index));
  const at::Tensor g_idx = stored.to(at::kLong);
  const int64_t group_size = source.layout.group_size;
  const at::Tensor in_order = at::arange(source.layout.in, at::kLong).div(group_size, "floor");
  if (g_idx.equal(in_order)) return at::Tensor();
  const auto where = [&] {
    return absl::StrCat(checkpoint.dir(), ": tensor \"", source.group_index, "\": ");
  };
  if (!source.format.desc_act) {
    const int64_t first = (g_idx != in_order).nonzero()[0][0].item<int64_t>();
    return absl::InvalidArgumentError(absl::StrCat(
        where(), "input ", first, " is in group ", g_idx[first].item<int64_t>(), ", not ",
        in_order[first].item<int64_t>(), " (", first, " / ", group_size, "): it does not match "
        "group_size, and ", source.format.method == PrequantizedMethod::kGptq
                                ? "desc_act is false"
                                : "actorder is not \"group\"",
        " (no activation order)"));
  }
  const int64_t groups = source.layout.groups();
  const at::Tensor out_of_range = at::logical_or(g_idx < 0, g_idx >= groups);
  if (out_of_range.any().item<bool>()) {
    const int64_t first = out_of_range.nonzero()[0][0].item<int64_t>();
    return absl::InvalidArgumentError(absl::StrCat(
        where(), "input ", first, " is in group ", g_idx[first].item<int64_t>(), ", outside 0..",
        groups - 1, " (", source.layout.in, " inputs in groups of ", group_size, ")"));
  }
  const at::Tensor counts = at::bincount(g_idx, {}, groups);
  const at::Tensor uneven = counts != group_size;
  if (uneven.any().item<bool>()) {
    const int64_t group = uneven.nonzero()[0][0].item<int64_t>();
    return absl::InvalidArgumentError(absl::StrCat(
        where(), "group ", group, " holds ", counts[group].item<int64_t>(),
        " inputs, not group_size ", group_size,
        " (activation order must put group_size inputs in every group)"));
  }
  // Stable, so each group keeps its inputs in their stored order.
  const at::Tensor order = std::get<1>(at::sort(g_idx, /*stable=*/true, /*dim=*/0, /*descending=*/false));
  return order.to(at::kInt);
}

// codes int64 [out, in], zeros (any integer) and scales [out, groups]: the packed weight
// with w = (code - zero)·scale, re-based so that 4-bit codes are 0..15 and 8-bit -128..127.
at::Tensor Pack(const at::Tensor& codes, const at::Tensor& zeros, const at::Tensor& scales,
                int64_t code_bias, const PackedLayout& layout) {
  // code' = code - bias keeps w = (code' - (zero - bias))·s; integers, so exact in float32.
  const at::Tensor s = scales.to(at::kFloat);
  const at::Tensor offsets = (zeros.to(at::kFloat) - static_cast<float>(code_bias)).neg() * s;
  return PackLinearWeight((codes - code_bias).to(at::kInt), s.contiguous(), offsets.contiguous(),
                          layout);
}

absl::StatusOr<at::Tensor> Read(const Checkpoint& checkpoint, const std::string& name) {
  return checkpoint.ReadTensor(name);
}

absl::StatusOr<at::Tensor> Repack(const Checkpoint& checkpoint,
                                  const QuantizedLinearSource& source) {
  const PackedLayout& layout = source.layout;
  const int bits = layout.bits;
  const int64_t unsigned_middle = bits == 8 ? 128 : 0;  // 8-bit codes are stored unsigned
  PLACER_ASSIGN_OR_RETURN(at::Tensor scales, Read(checkpoint, source.scales));
  switch (source.format.method) {
    case PrequantizedMethod::kGptq: {
      PLACER_ASSIGN_OR_RETURN(const at::Tensor order, InputOrder(checkpoint, source));
      PLACER_ASSIGN_OR_RETURN(at::Tensor qweight, Read(checkpoint, source.codes));
      PLACER_ASSIGN_OR_RETURN(at::Tensor qzeros, Read(checkpoint, source.zeros));
      // qweight [in/k, out] -> [in/k, out, k] -> [out, in]
      at::Tensor codes =
          UnpackWords(qweight, bits).permute({1, 0, 2}).reshape({layout.out, layout.in});
      // Activation order: inputs regrouped so that group g is the g-th block of group_size.
      if (order.defined()) codes = codes.index_select(1, order);
      at::Tensor zeros = UnpackWords(qzeros, bits).reshape({layout.groups(), layout.out}).t();
      if (source.format.zeros_minus_one) zeros = zeros + 1;
      return Pack(codes, zeros, scales.t(), unsigned_middle, layout);
    }
    case PrequantizedMethod::kAwq: {
      PLACER_ASSIGN_OR_RETURN(at::Tensor qweight, Read(checkpoint, source.codes));
      PLACER_ASSIGN_OR_RETURN(at::Tensor qzeros, Read(checkpoint, source.zeros));
      return Pack(UnpackAwqOutputs(qweight).t(), UnpackAwqOutputs(qzeros).t(), scales.t(), 0,
                  layout);
    }
    case PrequantizedMethod::kCompressedPacked: {
      PLACER_ASSIGN_OR_RETURN(at::Tensor shape, Read(checkpoint, source.shape));
      const at::Tensor expected = at::tensor(std::vector<int64_t>{layout.out, layout.in}, at::kLong);
      if (!shape.to(at::kLong).equal(expected)) {
        return absl::InvalidArgumentError(absl::StrCat(
            checkpoint.dir(), ": tensor \"", source.shape, "\" says [",
            shape[0].item<int64_t>(), ", ", shape[1].item<int64_t>(), "] but config.json implies [",
            layout.out, ", ", layout.in, "]"));
      }
      PLACER_ASSIGN_OR_RETURN(const at::Tensor order, InputOrder(checkpoint, source));
      PLACER_ASSIGN_OR_RETURN(at::Tensor packed, Read(checkpoint, source.codes));
      // Stored as code + 2^(bits-1): the signed code is stored - 2^(bits-1).
      at::Tensor stored = UnpackWords(packed, bits).reshape({layout.out, layout.in});
      if (order.defined()) stored = stored.index_select(1, order);
      at::Tensor zeros = at::zeros_like(scales, at::kLong);
      if (!source.zeros.empty()) {
        PLACER_ASSIGN_OR_RETURN(zeros, Read(checkpoint, source.zeros));
      }
      const int64_t half = int64_t{1} << (bits - 1);
      // w = (stored - half - zero)·s: the stored code with zero + half (4 bits keep 0..15).
      return Pack(stored, zeros.to(at::kLong) + half, scales, bits == 8 ? 128 : 0, layout);
    }
    case PrequantizedMethod::kCompressedInt: {
      PLACER_ASSIGN_OR_RETURN(at::Tensor weight, Read(checkpoint, source.codes));
      at::Tensor zeros = at::zeros_like(scales, at::kLong);
      if (!source.zeros.empty()) {
        PLACER_ASSIGN_OR_RETURN(zeros, Read(checkpoint, source.zeros));
      }
      return Pack(weight.to(at::kLong), zeros.to(at::kLong), scales, 0, layout);
    }
  }
  return absl::InternalError("unknown pre-quantized method");
}

}  // namespace

absl::StatusOr<at::Tensor> RepackQuantizedLinear(const Checkpoint& checkpoint,
                                                 const QuantizedLinearSource& source) {
  try {
    return Repack(checkpoint, source);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("repacking ", source.slot, " (", source.format.Describe(),
                                            "): ", e.what_without_backtrace()));
  }
}

absl::StatusOr<at::Tensor> QuantizedInputOrder(const Checkpoint& checkpoint,
                                               const QuantizedLinearSource& source) {
  try {
    return InputOrder(checkpoint, source);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("reading the input order of ", source.slot, ": ",
                                            e.what_without_backtrace()));
  }
}

}  // namespace placer::loader
