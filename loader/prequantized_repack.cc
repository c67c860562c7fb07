#include "loader/prequantized_repack.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

// The 32 / bits codes of a stored word, lowest bits first.
inline void UnpackWord(uint32_t word, int bits, int32_t* codes) {
  const uint32_t mask = (uint32_t{1} << bits) - 1;
  for (int j = 0; j < 32 / bits; ++j) codes[j] = static_cast<int32_t>((word >> (bits * j)) & mask);
}

// Writes output row n's codes as the checkpoint stores them, in its stored input order, into
// codes[0, in).
using StoredRow = std::function<void(int64_t n, int32_t* codes)>;

// A stored code tensor as contiguous int32 (words of packed codes, or int8 codes widened),
// after checking the shape its rows are read by (PrequantizedLinears checked the header's
// already; the bytes read must agree before raw indexing).
absl::StatusOr<at::Tensor> Codes(const Checkpoint& checkpoint, const std::string& name,
                                 const std::vector<int64_t>& shape) {
  PLACER_ASSIGN_OR_RETURN(at::Tensor stored, checkpoint.ReadTensor(name));
  if (stored.sizes() != at::IntArrayRef(shape)) {
    return absl::InvalidArgumentError(absl::StrCat(
        checkpoint.dir(), ": tensor \"", name, "\" has shape [", absl::StrJoin(stored.sizes(), ", "),
        "], not the [", absl::StrJoin(shape, ", "), "] its layout implies"));
  }
  return stored.to(at::kInt).contiguous();
}

// The packed weight with w = (code - zero)·scale, re-based so that 4-bit codes are 0..15 and
// 8-bit -128..127: code' = code - bias keeps w = (code' - (zero - bias))·s, integers, so exact
// in float32. zeros (any integer) and scales are [out, groups], small, taken whole; the codes
// come a row at a time from `stored_row` (inputs regrouped by `order` when defined), so no copy
// of the whole weight is made: the tensor formulas this replaces made five 64-bit copies of
// each weight's codes, and a ~1.1B GPTQ checkpoint took 64-69 s to load (bench/analysis.md).
at::Tensor PackRows(const StoredRow& stored_row, const at::Tensor& order, const at::Tensor& zeros,
                    const at::Tensor& scales, int64_t code_bias, const PackedLayout& layout) {
  const at::Tensor s = scales.to(at::kFloat).contiguous();
  const at::Tensor m =
      ((zeros.to(at::kFloat) - static_cast<float>(code_bias)).neg() * s).contiguous();
  TORCH_CHECK(s.dim() == 2 && s.size(0) == layout.out && s.size(1) == layout.groups() &&
                  m.sizes() == s.sizes(),
              "PackRows: scales and zeros must be [out, groups]");
  at::Tensor packed = ZeroPackedWeight(layout);
  uint8_t* base = static_cast<uint8_t*>(packed.data_ptr());
  const float* sp = s.data_ptr<float>();
  const float* mp = m.data_ptr<float>();
  const int32_t* op = order.defined() ? order.data_ptr<int32_t>() : nullptr;
  const int64_t in = layout.in, groups = layout.groups();
  const int64_t row_bytes = groups * layout.block_bytes();
  at::parallel_for(0, layout.out, 16, [&](int64_t n0, int64_t n1) {
    std::vector<int32_t> stored(static_cast<size_t>(in)), codes(static_cast<size_t>(in));
    for (int64_t n = n0; n < n1; ++n) {
      stored_row(n, stored.data());
      for (int64_t k = 0; k < in; ++k) {
        codes[k] = static_cast<int32_t>((op != nullptr ? stored[op[k]] : stored[k]) - code_bias);
      }
      PackLinearRow(codes.data(), sp + n * groups, mp + n * groups, layout, base + n * row_bytes);
    }
  });
  return packed;
}

absl::StatusOr<at::Tensor> Read(const Checkpoint& checkpoint, const std::string& name) {
  return checkpoint.ReadTensor(name);
}

absl::StatusOr<at::Tensor> Repack(const Checkpoint& checkpoint,
                                  const QuantizedLinearSource& source) {
  const PackedLayout& layout = source.layout;
  const int bits = layout.bits;
  const int64_t unsigned_middle = bits == 8 ? 128 : 0;  // 8-bit codes are stored unsigned
  const int64_t per_word = 32 / bits;
  const int64_t in = layout.in, out = layout.out;
  PLACER_ASSIGN_OR_RETURN(at::Tensor scales, Read(checkpoint, source.scales));
  switch (source.format.method) {
    case PrequantizedMethod::kGptq: {
      PLACER_ASSIGN_OR_RETURN(const at::Tensor order, InputOrder(checkpoint, source));
      // qweight [in / per_word, out]: word (i / per_word, n) holds input i of output n.
      PLACER_ASSIGN_OR_RETURN(const at::Tensor qweight,
                              Codes(checkpoint, source.codes, {in / per_word, out}));
      PLACER_ASSIGN_OR_RETURN(at::Tensor qzeros, Read(checkpoint, source.zeros));
      at::Tensor zeros = UnpackWords(qzeros, bits).reshape({layout.groups(), out}).t();
      if (source.format.zeros_minus_one) zeros = zeros + 1;
      const int32_t* words = qweight.data_ptr<int32_t>();
      return PackRows(
          [&](int64_t n, int32_t* codes) {
            for (int64_t w = 0; w < in / per_word; ++w) {
              UnpackWord(static_cast<uint32_t>(words[w * out + n]), bits, codes + w * per_word);
            }
          },
          order, zeros, scales.t(), unsigned_middle, layout);
    }
    case PrequantizedMethod::kAwq: {
      // qweight [in, out / 8]: output 8·w + k of input i is nibble kAwqNibble[k] of word (i, w).
      if (bits != 4) {
        return absl::InvalidArgumentError(
            absl::StrCat(source.slot, ": AWQ GEMM packs 4-bit codes, not ", bits, "-bit ones"));
      }
      PLACER_ASSIGN_OR_RETURN(const at::Tensor qweight,
                              Codes(checkpoint, source.codes, {in, out / 8}));
      PLACER_ASSIGN_OR_RETURN(at::Tensor qzeros, Read(checkpoint, source.zeros));
      constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};
      const int32_t* words = qweight.data_ptr<int32_t>();
      const int64_t words_per_input = out / 8;
      return PackRows(
          [&](int64_t n, int32_t* codes) {
            const int shift = 4 * kAwqNibble[n % 8];
            for (int64_t i = 0; i < in; ++i) {
              const auto word = static_cast<uint32_t>(words[i * words_per_input + n / 8]);
              codes[i] = static_cast<int32_t>((word >> shift) & 0xF);
            }
          },
          at::Tensor(), UnpackAwqOutputs(qzeros).t(), scales.t(), 0, layout);
    }
    case PrequantizedMethod::kCompressedPacked: {
      PLACER_ASSIGN_OR_RETURN(at::Tensor shape, Read(checkpoint, source.shape));
      const at::Tensor expected = at::tensor(std::vector<int64_t>{out, in}, at::kLong);
      if (!shape.to(at::kLong).equal(expected)) {
        return absl::InvalidArgumentError(absl::StrCat(
            checkpoint.dir(), ": tensor \"", source.shape, "\" says [",
            shape[0].item<int64_t>(), ", ", shape[1].item<int64_t>(), "] but config.json implies [",
            out, ", ", in, "]"));
      }
      PLACER_ASSIGN_OR_RETURN(const at::Tensor order, InputOrder(checkpoint, source));
      // weight_packed [out, in / per_word]: output n's inputs in order, lowest bits first.
      PLACER_ASSIGN_OR_RETURN(const at::Tensor packed,
                              Codes(checkpoint, source.codes, {out, in / per_word}));
      at::Tensor zeros = at::zeros_like(scales, at::kLong);
      if (!source.zeros.empty()) {
        PLACER_ASSIGN_OR_RETURN(zeros, Read(checkpoint, source.zeros));
      }
      const int64_t half = int64_t{1} << (bits - 1);
      const int32_t* words = packed.data_ptr<int32_t>();
      const int64_t words_per_row = in / per_word;
      // Stored as code + 2^(bits-1): w = (stored - half - zero)·s, the stored code with
      // zero + half (4 bits keep 0..15).
      return PackRows(
          [&](int64_t n, int32_t* codes) {
            const int32_t* row = words + n * words_per_row;
            for (int64_t w = 0; w < words_per_row; ++w) {
              UnpackWord(static_cast<uint32_t>(row[w]), bits, codes + w * per_word);
            }
          },
          order, zeros.to(at::kLong) + half, scales, bits == 8 ? 128 : 0, layout);
    }
    case PrequantizedMethod::kCompressedInt: {
      // int8 [out, in], the signed codes themselves.
      PLACER_ASSIGN_OR_RETURN(const at::Tensor weight, Codes(checkpoint, source.codes, {out, in}));
      at::Tensor zeros = at::zeros_like(scales, at::kLong);
      if (!source.zeros.empty()) {
        PLACER_ASSIGN_OR_RETURN(zeros, Read(checkpoint, source.zeros));
      }
      const int32_t* values = weight.data_ptr<int32_t>();
      return PackRows(
          [&](int64_t n, int32_t* codes) { std::copy_n(values + n * in, in, codes); },
          at::Tensor(), zeros.to(at::kLong), scales, 0, layout);
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
