#include "model/quantized_int4_quads.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "model/packed_block_header.h"
#include "model/row_passes.h"
#include "model/vector_sum.h"
#include "base/cache_line_vector.h"

namespace placer::model {
namespace {

using loader::kPackedBlockHeaderBytes;

constexpr int64_t kInputsPerQuad = 128;
constexpr int64_t kQuadBytes = 64;
constexpr int kCodesPerLane = 8;
constexpr int kChains = 4;
// Input rows per pass over a weight row: 4 chains per row stay in the 32 vector registers
// with the table, the codes and an input; more rows take another pass (the weight row is then
// in L1).
constexpr int kMaxRows = 4;

// Weight rows ahead that a row prefetches (one sequential stream per thread), at least
// kStreamPrefetchBytes (stream_prefetch.h: 4 rows of the small preset's 4-bit weights are
// 1.6 KiB, where a float stream gained nothing).
constexpr int64_t kRowsAhead = 4;

// Each row's products of weight row n, its chains added: ((c0 + c1) + (c2 + c3)).
template <int R>
__attribute__((target("avx512f,avx512bw,fma"), always_inline)) inline void RowSums(
    const QuantOperands& op, const float* quads, int64_t n, __m512 (&sums)[R]) {
  const int64_t row_bytes = op.groups * op.block_bytes;
  const uint8_t* row = op.w + n * row_bytes;
  const int64_t rows_ahead = std::max(kRowsAhead, op.stream_rows_ahead);
  const uint8_t* ahead = n + rows_ahead < op.out ? row + rows_ahead * row_bytes : row;
  const int64_t quads_per_group = op.group_size / kInputsPerQuad;
  const __m512 code_values = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 chain[kChains][R];
  _Pragma("GCC unroll 4") for (int c = 0; c < kChains; ++c) {
    _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) chain[c][r] = _mm512_setzero_ps();
  }
  for (int64_t g = 0; g < op.groups; ++g) {
    const uint8_t* block = row + g * op.block_bytes;
    const float scale = BlockScale(block), offset = BlockOffset(block);
    // The block's 16 possible weights, fma(q, s, m) as the loader dequantizes them.
    const __m512 table =
        _mm512_fmadd_ps(code_values, _mm512_set1_ps(scale), _mm512_set1_ps(offset));
    const uint8_t* codes = block + kPackedBlockHeaderBytes;
    const uint8_t* codes_ahead = ahead + g * op.block_bytes + kPackedBlockHeaderBytes;
    const float* x = quads + g * op.group_size;
    for (int64_t q = 0; q < quads_per_group; ++q) {
      _mm_prefetch(reinterpret_cast<const char*>(codes_ahead + q * kQuadBytes), _MM_HINT_T0);
      __m512i lanes = _mm512_loadu_si512(codes + q * kQuadBytes);
      const float* xq = x + q * kInputsPerQuad;
      _Pragma("GCC unroll 8") for (int k = 0; k < kCodesPerLane; ++k) {
        const __m512 w = _mm512_permutexvar_ps(lanes, table);  // reads each lane's low 4 bits
        lanes = _mm512_srli_epi32(lanes, 4);
        _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) {
          chain[k % kChains][r] = _mm512_fmadd_ps(w, _mm512_loadu_ps(xq + r * op.in + 16 * k),
                                                  chain[k % kChains][r]);
        }
      }
    }
  }
  _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) {
    sums[r] = _mm512_add_ps(_mm512_add_ps(chain[0][r], chain[1][r]),
                            _mm512_add_ps(chain[2][r], chain[3][r]));
  }
}

template <int R>
__attribute__((target("avx512f,avx512bw,fma"))) void Chunk(const QuantOperands& op,
                                                          const float* quads, int64_t r0,
                                                          int64_t n0, int64_t n1) {
  const float* x = quads + r0 * op.in;
  float* y = op.y + r0 * op.out;
  int64_t n = n0;
  if constexpr (R == 1) {
    // Sixteen outputs' lanes summed together, in the intrinsic's order (vector_sum.h): one
    // output's own lane sum is 12 dependent instructions against ~48 multiply-adds at 768
    // inputs.
    for (; n + 16 <= n1; n += 16) {
      __m512 lanes[16];
      _Pragma("GCC unroll 1") for (int i = 0; i < 16; ++i) {
        __m512 sum[1];
        RowSums<1>(op, x, n + i, sum);
        lanes[i] = sum[0];
      }
      const __m512 bias = op.bias != nullptr ? _mm512_loadu_ps(op.bias + n) : _mm512_setzero_ps();
      _mm512_storeu_ps(y + n, _mm512_add_ps(HorizontalSums512x16(lanes), bias));
    }
  }
  for (; n < n1; ++n) {
    __m512 sums[R];
    RowSums<R>(op, x, n, sums);
    const float bias = op.bias != nullptr ? op.bias[n] : 0.0f;
    _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) {
      y[r * op.out + n] = _mm512_reduce_add_ps(sums[r]) + bias;
    }
  }
}

}  // namespace

bool Int4QuadsApply(const loader::PackedLayout& layout) {
  return layout.bits == 4 && layout.group_size > 0 && layout.group_size % kInputsPerQuad == 0 &&
         layout.in % layout.group_size == 0;
}

const float* ArrangeInt4QuadInputs(const QuantOperands& op, base::CacheLineVector<float>* buffer) {
  // 64-byte aligned: every input vector the kernel loads is then one cache line (a load split
  // across two lines costs more on Zen 4).
  constexpr size_t kAlignFloats = 16;
  buffer->resize(static_cast<size_t>(op.rows * op.in) + kAlignFloats);
  const auto address = reinterpret_cast<uintptr_t>(buffer->data());
  float* quads = buffer->data() + (((64 - address % 64) % 64) / sizeof(float));
  for (int64_t r = 0; r < op.rows; ++r) {
    const float* x = op.x + r * op.in;
    float* out = quads + r * op.in;
    for (int64_t base = 0; base < op.in; base += kInputsPerQuad) {
      // Lane i of the quad's dwords holds bytes 4i..4i+3: 16-byte unit i / 4, whose byte b has
      // the unit's inputs b (low nibble) and 16 + b (high). Shift k takes byte k / 2's nibble
      // k % 2.
      for (int k = 0; k < kCodesPerLane; ++k) {
        for (int i = 0; i < 16; ++i) {
          const int64_t input = base + (i / 4) * 32 + 4 * (i % 4) + k / 2 + 16 * (k % 2);
          out[base + 16 * k + i] = x[input];
        }
      }
    }
  }
  return quads;
}

void QuantizedRowsInt4Quads(const QuantOperands& op, const float* quads, int64_t n0, int64_t n1) {
  InPassesOfUpTo<kMaxRows>(op.rows, [&](auto rows, int64_t r) {
    Chunk<decltype(rows)::value>(op, quads, r, n0, n1);
  });
}

}  // namespace placer::model

#pragma GCC diagnostic pop
