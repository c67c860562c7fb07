// The prompt-chunk three-digit kernel (quantized_int4_digit_chunks.h says what it promises).
//
// A tile is T outputs (8, or 1 for the last few) by all the chunk's row vectors, walked block
// by block: each block's T code rows are unpacked once (quantized_int4_digits.cc's order: a
// 64-input span's 32 payload bytes become inputs 0-15, 32-47, 16-31, 48-63) into 128 bytes
// each, then every pass of up to 3 row vectors runs its three digits over them. Four codes of
// one output are broadcast and multiplied with four digits of 16 rows, so the quads' lane j of
// position q holds the digits of unpack positions 4q..4q+3 of row j.
#include "model/quantized_int4_digit_chunks.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "loader/quantized_layout.h"
#include "model/packed_block_header.h"
#include "model/quantized_int4_digits.h"
#include "base/cache_line_vector.h"

namespace placer::model {
namespace {

using loader::kPackedBlockHeaderBytes;

constexpr int64_t kLanes = 16;                 // rows per row vector
constexpr int64_t kDigits = 3;
constexpr int64_t kQuads = kDigitBlock / 4;    // four-input positions per block
constexpr int64_t kSpan = 64;
constexpr int64_t kQuadsPerSpan = kSpan / 4;
constexpr int64_t kBlockQuadInts = kDigits * kQuads * kLanes;  // one row vector's block
constexpr int kTileOutputs = 8;
constexpr int kMostRowVectors = 3;             // per pass: 8 x 3 accumulators

// acc += codes · digits, four products per int32 lane. GCC 12's _mm512_dpbusd_epi32 copies its
// accumulator through another register and spills a tile of 24 to the stack (the kernel then
// ran at a third of the speed); the instruction itself adds in place.
__attribute__((target("avx512f,avx512vnni"), always_inline)) inline void Dot(__m512i& acc,
                                                                          __m512i codes,
                                                                          __m512i digits) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(codes), "v"(digits));
}

// Block b of row vectors [v, v + J) by the tile's T outputs (their codes unpacked in `codes`):
// per digit, acc[t · J + j] += codes of output t · digits of row vector j; after the second,
// sums[(j · T + t) · 16 + lane] += float(acc) · ((scale_t · 2^8) · step_j), after the third the
// same with 1. One function body with every loop over the tile unrolled, kept out of its caller:
// GCC keeps the accumulators in registers only then (inlined, or with helpers taking the array
// by reference, it left them on the stack).
template <int T, int J>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vnni"), noinline)) void BlockOfRows(
    const int32_t* quads, int64_t vector_stride, const uint8_t (*codes)[kDigitBlock],
    const float* scales, const float* steps, int64_t steps_stride, float* sums) {
  __m512i acc[T * J];
  _Pragma("GCC unroll 24") for (int i = 0; i < T * J; ++i) acc[i] = _mm512_setzero_si512();
  _Pragma("GCC unroll 3") for (int d = 0; d < kDigits; ++d) {
    const int32_t* digit_quads = quads + d * kQuads * kLanes;
    _Pragma("GCC unroll 1") for (int64_t q = 0; q < kQuads; ++q) {
      __m512i digits[J];
      _Pragma("GCC unroll 3") for (int j = 0; j < J; ++j) {
        digits[j] = _mm512_loadu_si512(digit_quads + j * vector_stride + q * kLanes);
      }
      _Pragma("GCC unroll 8") for (int t = 0; t < T; ++t) {
        int32_t four;
        std::memcpy(&four, codes[t] + 4 * q, sizeof(four));
        const __m512i broadcast = _mm512_set1_epi32(four);
        _Pragma("GCC unroll 3") for (int j = 0; j < J; ++j) Dot(acc[t * J + j], broadcast, digits[j]);
      }
    }
    if (d == 0) {
      _Pragma("GCC unroll 24") for (int i = 0; i < T * J; ++i) acc[i] = _mm512_slli_epi32(acc[i], 8);
      continue;
    }
    const float radix = d == 1 ? 256.0f : 1.0f;
    _Pragma("GCC unroll 8") for (int t = 0; t < T; ++t) {
      const __m512 scale = _mm512_set1_ps(scales[t] * radix);
      _Pragma("GCC unroll 3") for (int j = 0; j < J; ++j) {
        const __m512 step = _mm512_mul_ps(scale, _mm512_loadu_ps(steps + j * steps_stride));
        float* sum = sums + (j * T + t) * kLanes;
        _mm512_storeu_ps(sum, _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[t * J + j]), step,
                                              _mm512_loadu_ps(sum)));
        acc[t * J + j] = _mm512_setzero_si512();
      }
    }
  }
}

// Outputs [n, n + T) of every row: `sums` ([row_vectors, T, 16]) is the tile's scratch.
template <int T>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vnni"))) void OutputTile(
    const QuantOperands& op, const Int4DigitChunkInputs& in, int64_t n, float* sums) {
  const int64_t row_bytes = op.groups * op.block_bytes;
  const int64_t blocks = op.in / kDigitBlock;
  const int64_t blocks_per_group = op.group_size / kDigitBlock;
  const int64_t vectors = in.row_vectors;
  const int64_t vector_stride = blocks * kBlockQuadInts;
  const int64_t steps_stride = blocks * kLanes;
  std::fill(sums, sums + vectors * T * kLanes, 0.0f);
  alignas(64) uint8_t codes[T][kDigitBlock];
  float scales[T];
  const __m512i shifts = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
  for (int64_t g = 0; g < op.groups; ++g) {
    const uint8_t* group_blocks[T];
    for (int t = 0; t < T; ++t) {
      group_blocks[t] = op.w + (n + t) * row_bytes + g * op.block_bytes;
      scales[t] = BlockScale(group_blocks[t]);
      const __m512 offset = _mm512_set1_ps(BlockOffset(group_blocks[t]));
      for (int64_t v = 0; v < vectors; ++v) {
        float* sum = sums + (v * T + t) * kLanes;
        const float* group_sum = in.group_sums.data() + (v * op.groups + g) * kLanes;
        _mm512_storeu_ps(sum, _mm512_fmadd_ps(offset, _mm512_loadu_ps(group_sum), _mm512_loadu_ps(sum)));
      }
    }
    for (int64_t bb = 0; bb < blocks_per_group; ++bb) {
      const int64_t b = g * blocks_per_group + bb;
      for (int t = 0; t < T; ++t) {
        const uint8_t* bytes = group_blocks[t] + kPackedBlockHeaderBytes + bb * (kDigitBlock / 2);
        for (int s = 0; s < 2; ++s) {
          const __m512i payload = _mm512_broadcast_i64x4(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes + 32 * s)));
          _mm512_store_si512(codes[t] + kSpan * s,
                             _mm512_and_si512(_mm512_srlv_epi64(payload, shifts), low_nibbles));
        }
      }
      for (int64_t v = 0; v < vectors; v += kMostRowVectors) {
        const int32_t* quads = in.quads.data() + v * vector_stride + b * kBlockQuadInts;
        const float* steps = in.steps.data() + v * steps_stride + b * kLanes;
        float* tile_sums = sums + v * T * kLanes;
        switch (std::min<int64_t>(kMostRowVectors, vectors - v)) {
          case 3: BlockOfRows<T, 3>(quads, vector_stride, codes, scales, steps, steps_stride, tile_sums); break;
          case 2: BlockOfRows<T, 2>(quads, vector_stride, codes, scales, steps, steps_stride, tile_sums); break;
          default: BlockOfRows<T, 1>(quads, vector_stride, codes, scales, steps, steps_stride, tile_sums); break;
        }
      }
    }
  }
  for (int64_t v = 0; v < vectors; ++v) {
    for (int t = 0; t < T; ++t) {
      const float bias = op.bias != nullptr ? op.bias[n + t] : 0.0f;
      const float* sum = sums + (v * T + t) * kLanes;
      for (int64_t lane = 0; lane < kLanes && v * kLanes + lane < op.rows; ++lane) {
        op.y[(v * kLanes + lane) * op.out + n + t] = sum[lane] + bias;
      }
    }
  }
}

}  // namespace

Int4DigitChunkInputs& DigitChunkInputsBuffer() {
  thread_local Int4DigitChunkInputs inputs;
  constexpr size_t kKeptInts = size_t{1} << 20;
  if (inputs.quads.capacity() > kKeptInts) inputs = Int4DigitChunkInputs();
  return inputs;
}

void ArrangeDigitChunkInputs(const QuantOperands& op, Int4DigitChunkInputs* out) {
  thread_local Int4Digits digits;
  DigitsOfRows(op, &digits);
  const int64_t blocks = op.in / kDigitBlock;
  const int64_t vectors = (op.rows + kLanes - 1) / kLanes;
  out->row_vectors = vectors;
  // Zeros where a row vector has fewer than 16 rows: their digits add nothing to any lane.
  out->quads.assign(static_cast<size_t>(vectors * blocks * kBlockQuadInts), 0);
  out->steps.assign(static_cast<size_t>(vectors * blocks * kLanes), 0.0f);
  out->group_sums.assign(static_cast<size_t>(vectors * op.groups * kLanes), 0.0f);
  for (int64_t r = 0; r < op.rows; ++r) {
    const int64_t v = r / kLanes, lane = r % kLanes;
    for (int64_t b = 0; b < blocks; ++b) {
      out->steps[static_cast<size_t>((v * blocks + b) * kLanes + lane)] =
          digits.steps[static_cast<size_t>(r * blocks + b)];
      // DigitsOfRows keeps per span the digits d0, d1, d2 of its 64 inputs in unpack order.
      const int8_t* row_digits = digits.digits.data() + (r * blocks + b) * kDigits * kDigitBlock;
      int32_t* block_quads = out->quads.data() + (v * blocks + b) * kBlockQuadInts + lane;
      for (int64_t s = 0; s < kDigitBlock / kSpan; ++s) {
        for (int64_t j = 0; j < kDigits; ++j) {
          const int8_t* span = row_digits + (s * kDigits + j) * kSpan;
          for (int64_t q = 0; q < kQuadsPerSpan; ++q) {
            std::memcpy(block_quads + (j * kQuads + s * kQuadsPerSpan + q) * kLanes, span + 4 * q,
                        sizeof(int32_t));
          }
        }
      }
    }
    for (int64_t g = 0; g < op.groups; ++g) {
      out->group_sums[static_cast<size_t>((v * op.groups + g) * kLanes + lane)] =
          op.x_group_sums[r * op.groups + g];
    }
  }
  constexpr size_t kKeptDigits = size_t{1} << 22;
  if (digits.digits.capacity() > kKeptDigits) digits = Int4Digits();
}

void QuantizedChunkRowsInt4Digits(const QuantOperands& op, const Int4DigitChunkInputs& inputs,
                                  int64_t n0, int64_t n1) {
  thread_local base::CacheLineVector<float> sums;
  sums.resize(static_cast<size_t>(inputs.row_vectors * kTileOutputs * kLanes));
  int64_t n = n0;
  for (; n + kTileOutputs <= n1; n += kTileOutputs) OutputTile<kTileOutputs>(op, inputs, n, sums.data());
  for (; n < n1; ++n) OutputTile<1>(op, inputs, n, sums.data());
}

}  // namespace placer::model

#pragma GCC diagnostic pop
