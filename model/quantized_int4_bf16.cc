// The 4-bit x BF16 kernel (quantized_int4_bf16.h says what it promises).
//
// 128 inputs are 64 code bytes (four 16-byte units of 32 inputs: byte j of a unit holds input j
// in its low nibble and j + 16 in its high one). Read as 16 dwords, dword i of unit u = i / 4
// (j = 4 (i % 4)) holds the nibbles of inputs j, j+16 (byte 0), j+1, j+17, j+2, j+18, j+3, j+19.
// Shifting the dword by +3, -1, -5 and -9 bits brings two nibbles at a time to bits 3-6 and
// 19-22, the top of both BF16 halves' mantissas; one vpternlogd masks them and sets the
// exponent of 1.0:  (inputs j, j+2), (j+16, j+18), (j+1, j+3), (j+17, j+19).  The inputs are
// arranged once per call into those pairs (ArrangeInt4Bf16Inputs), so vdpbf16ps multiplies each
// code with its own input.
#include "model/quantized_int4_bf16.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "model/keep_in_register.h"
#include "model/packed_bf16_kernels.h"
#include "model/row_passes.h"
#include "base/cache_line_vector.h"

namespace placer::model {
namespace {

using loader::kPackedBlockHeaderBytes;

constexpr int64_t kInputsPerQuad = 128;
constexpr int64_t kPairsPerQuad = 64;  // four vectors of 16 dwords
constexpr int64_t kInputsPerUnit = 32;
constexpr int64_t kUnitBytes = 16;
// Weight rows ahead that a row prefetches (one sequential stream per thread), at least
// kStreamPrefetchBytes (stream_prefetch.h: 4 rows of the small preset's 4-bit weights are
// 1.6 KiB, where a float stream gained nothing).
constexpr int64_t kRowsAhead = 4;

// The four products of a quad's codes with row r's arranged inputs, summed in one fixed order
// (the same in every kernel below, so a row's bits do not depend on how its groups are found).
template <int R>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma"), always_inline)) inline void
AccumulateQuad(__m512i codes, __m512 scale16, const uint32_t* x, int64_t quads, int64_t q,
               __m512 (&acc)[R]) {
  const __m512i mantissa = _mm512_set1_epi32(0x00780078);
  const __m512i one = _mm512_set1_epi32(0x3F803F80);
  // 0xEA: (a & b) | c.
  const __m512bh w0 =
      (__m512bh)_mm512_ternarylogic_epi32(_mm512_slli_epi32(codes, 3), mantissa, one, 0xEA);
  const __m512bh w1 =
      (__m512bh)_mm512_ternarylogic_epi32(_mm512_srli_epi32(codes, 1), mantissa, one, 0xEA);
  const __m512bh w2 =
      (__m512bh)_mm512_ternarylogic_epi32(_mm512_srli_epi32(codes, 5), mantissa, one, 0xEA);
  const __m512bh w3 =
      (__m512bh)_mm512_ternarylogic_epi32(_mm512_srli_epi32(codes, 9), mantissa, one, 0xEA);
  _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
    const uint32_t* xq = x + (r * quads + q) * kPairsPerQuad;
    __m512 dot = _mm512_dpbf16_ps(_mm512_setzero_ps(), w0, (__m512bh)_mm512_loadu_si512(xq));
    dot = _mm512_dpbf16_ps(dot, w1, (__m512bh)_mm512_loadu_si512(xq + 16));
    dot = _mm512_dpbf16_ps(dot, w2, (__m512bh)_mm512_loadu_si512(xq + 32));
    dot = _mm512_dpbf16_ps(dot, w3, (__m512bh)_mm512_loadu_si512(xq + 48));
    acc[r] = _mm512_fmadd_ps(dot, scale16, acc[r]);
  }
}

// Where each 32-input unit of a weight row lies: its codes' and its block's byte offsets in the
// row. Computed once per call, so the loop over a row's units divides nothing.
struct UnitPlace {
  int64_t codes, block;
};

std::vector<UnitPlace> UnitPlaces(const QuantOperands& op) {
  const int64_t units_per_group = op.group_size / kInputsPerUnit;
  std::vector<UnitPlace> places(static_cast<size_t>(op.in / kInputsPerUnit));
  for (int64_t u = 0; u < static_cast<int64_t>(places.size()); ++u) {
    const int64_t g = u / units_per_group;
    places[static_cast<size_t>(u)] = {
        g * op.block_bytes + kPackedBlockHeaderBytes + (u - g * units_per_group) * kUnitBytes,
        g * op.block_bytes};
  }
  return places;
}

// A quad whose units lie in different blocks (groups of 32, 64, 96, ...): each 128-bit lane is
// one unit with its own 16·s; units past `in` are zero codes with scale 0.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void GatherQuad(
    const uint8_t* row, const UnitPlace* places, int64_t units, int64_t quad, __m512i* codes,
    __m512* scale16) {
  __m128i lane_codes[4];
  __m128 lane_scales[4];
  for (int k = 0; k < 4; ++k) {
    const int64_t u = quad * 4 + k;
    if (u < units) {
      lane_codes[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + places[u].codes));
      lane_scales[k] = _mm_set1_ps(16.0f * BlockScale(row + places[u].block));
    } else {
      lane_codes[k] = _mm_setzero_si128();
      lane_scales[k] = _mm_setzero_ps();
    }
  }
  *codes = _mm512_castsi128_si512(lane_codes[0]);
  *scale16 = _mm512_castps128_ps512(lane_scales[0]);
  for (int k = 1; k < 4; ++k) {
    *codes = _mm512_inserti32x4(*codes, lane_codes[k], k);
    *scale16 = _mm512_insertf32x4(*scale16, lane_scales[k], k);
  }
}

template <int R>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma"))) void Chunk(
    const QuantOperands& op, const uint32_t* pairs, int64_t r0, int64_t n0, int64_t n1) {
  const int64_t quads = (op.in + kInputsPerQuad - 1) / kInputsPerQuad;
  const int64_t row_bytes = op.groups * op.block_bytes;
  const int64_t rows_ahead = std::max(kRowsAhead, op.stream_rows_ahead);
  // Groups of whole quads (128, 256, ...): a group's quads are consecutive loads after its
  // header, and its offset term joins the row's sum while the next group's codes load.
  const bool whole_blocks = op.group_size % kInputsPerQuad == 0;
  const int64_t quads_per_group = op.group_size / kInputsPerQuad;
  const std::vector<UnitPlace> places = whole_blocks ? std::vector<UnitPlace>() : UnitPlaces(op);
  const int64_t units = op.in / kInputsPerUnit;
  const uint32_t* x = pairs + r0 * quads * kPairsPerQuad;
  const float* x_sums = op.x_group_sums + r0 * op.groups;
  float* y = op.y + r0 * op.out;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = op.w + n * row_bytes;
    const uint8_t* ahead = n + rows_ahead < op.out ? row + rows_ahead * row_bytes : row;
    __m512 acc[R];
    float offsets[R];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
      acc[r] = _mm512_setzero_ps();
      offsets[r] = 0;
    }
    // Each group's offset term: (m - 16·s) times the group's input sum, in group order.
    auto add_offset = [&](int64_t g) {
      const uint8_t* block = row + g * op.block_bytes;
      const float shift = BlockOffset(block) - 16.0f * BlockScale(block);
      _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
        offsets[r] = __builtin_fmaf(shift, x_sums[r * op.groups + g], offsets[r]);
      }
    };
    if (op.group_size == kInputsPerQuad) {
      // Groups of 128, one quad a block (every --quantize int4 and most checkpoints). A block is
      // ~13 vector operations, and the CPU retires about two a cycle (Zen 5: shifts, vpternlogd
      // and vdpbf16ps share the pipes): no loop over a block's quads, and 16·s applied once to
      // the row's sum instead of a multiply per block (scaling by 16 commutes with every
      // rounding barring sums below 2^-122, so the bits are the same).
      const uint8_t* block = row;
      const uint8_t* block_ahead = ahead;
      for (int64_t g = 0; g < op.groups;
           ++g, block += op.block_bytes, block_ahead += op.block_bytes) {
        _mm_prefetch(reinterpret_cast<const char*>(block_ahead), _MM_HINT_T0);
        const float scale = BlockScale(block);
        // Loaded once: left to itself GCC reads the 64 bytes again for each of the four shifts.
        __m512i codes = _mm512_loadu_si512(block + kPackedBlockHeaderBytes);
        KeepInRegister(codes);
        AccumulateQuad<R>(codes, _mm512_set1_ps(scale), x, quads, g, acc);
        const float shift = __builtin_fmaf(-16.0f, scale, BlockOffset(block));  // as add_offset's
        _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
          offsets[r] = __builtin_fmaf(shift, x_sums[r * op.groups + g], offsets[r]);
        }
      }
      _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
        acc[r] = _mm512_mul_ps(acc[r], _mm512_set1_ps(16.0f));
      }
    } else if (whole_blocks) {
      for (int64_t g = 0; g < op.groups; ++g) {
        const uint8_t* block = row + g * op.block_bytes;
        const uint8_t* codes = block + kPackedBlockHeaderBytes;
        const __m512 scale16 = _mm512_set1_ps(16.0f * BlockScale(block));
        for (int64_t k = 0; k < quads_per_group; ++k) {
          const int64_t q = g * quads_per_group + k;
          _mm_prefetch(reinterpret_cast<const char*>(ahead + (q * kInputsPerQuad / 2)), _MM_HINT_T0);
          AccumulateQuad<R>(_mm512_loadu_si512(codes + k * (kInputsPerQuad / 2)), scale16, x,
                            quads, q, acc);
        }
        add_offset(g);
      }
    } else {
      for (int64_t q = 0; q < quads; ++q) {
        __m512i codes;
        __m512 scale16;
        GatherQuad(row, places.data(), units, q, &codes, &scale16);
        _mm_prefetch(reinterpret_cast<const char*>(ahead + (q * kInputsPerQuad / 2)), _MM_HINT_T0);
        AccumulateQuad<R>(codes, scale16, x, quads, q, acc);
      }
      for (int64_t g = 0; g < op.groups; ++g) add_offset(g);
    }
    StoreRowOutputs<R>(acc, offsets, op.bias, y, op.out, n);
  }
}

}  // namespace

bool Int4Bf16KernelRuns() { return PackedBf16KernelsRun(); }

bool Int4Bf16KernelApplies(const loader::PackedLayout& layout) {
  return PackedInGroupsOf(layout, 4, kInputsPerUnit);
}

namespace {

// vpermt2w indices gathering, from two units' 16-float vectors (the second's words at +32), the
// BF16 halves of inputs (j + a, j + a + 2), j = 0, 4, 8, 12, as dwords 0-3 (first unit) and
// 4-7 (second): dword 4v + m's low word is input 4m + a's high word (2 (4m + a) + 1), its high
// word input 4m + a + 2's. Words 16-31 are not used.
__attribute__((target("avx512f,avx512bw"))) __m512i PairWords(int a) {
  alignas(64) uint16_t words[32] = {};
  for (int w = 0; w < 16; ++w) {
    const int lane = w / 2, unit = lane / 4, m = lane % 4;
    const int input = 4 * m + a + (w % 2 == 0 ? 0 : 2);
    words[w] = static_cast<uint16_t>(unit * 32 + 2 * input + 1);
  }
  return _mm512_load_si512(words);
}

// One row's arrangement: per quad, eight vectors of 16 inputs (two per 32-input unit; zeros for
// units past `in`), and for each of the four shifts two word permutes (units 0-1, 2-3) joined.
__attribute__((target("avx512f,avx512bw"))) void ArrangeRowAvx512(const float* x, int64_t in,
                                                                 int64_t quads, uint32_t* out) {
  const __m512i pick[2] = {PairWords(0), PairWords(1)};
  for (int64_t q = 0; q < quads; ++q) {
    __m512i z[8];
    for (int k = 0; k < 8; ++k) {
      // `in` is a multiple of 32: a vector of 16 inputs is wholly inside or wholly past it.
      const int64_t first = q * kInputsPerQuad + 16 * k;
      z[k] = first < in ? _mm512_loadu_si512(x + first) : _mm512_setzero_si512();
    }
    for (int shift = 0; shift < 4; ++shift) {
      // The shifts pair inputs (j, j+2), (j+16, j+18), (j+1, j+3), (j+17, j+19) (the comment at
      // the top): (a, a + 2) in each unit's first 16 inputs (shifts 0, 2) or its second 16
      // (shifts 1, 3), a = 0 for shifts 0, 1 and 1 for shifts 2, 3.
      const int half = shift % 2;
      const __m512i& index = pick[shift / 2];
      const __m512i units01 = _mm512_permutex2var_epi16(z[half], index, z[2 + half]);
      const __m512i units23 = _mm512_permutex2var_epi16(z[4 + half], index, z[6 + half]);
      _mm512_storeu_si512(out + q * kPairsPerQuad + shift * 16,
                          _mm512_inserti64x4(units01, _mm512_castsi512_si256(units23), 1));
    }
  }
}

}  // namespace

void ArrangeInt4Bf16Inputs(const QuantOperands& op, base::CacheLineVector<uint32_t>* pairs) {
  const int64_t quads = (op.in + kInputsPerQuad - 1) / kInputsPerQuad;
  pairs->resize(static_cast<size_t>(op.rows * quads * kPairsPerQuad));
  // Vector permutes: the scalar arrangement took 2.3 us a call at 2048 inputs (5.5 at 5632),
  // on the calling thread while the helpers waited: ~1.5 % of a ~1.1B int4 decode step.
  for (int64_t r = 0; r < op.rows; ++r) {
    ArrangeRowAvx512(op.x + r * op.in, op.in, quads, pairs->data() + r * quads * kPairsPerQuad);
  }
}

void QuantizedRowsInt4Bf16(const QuantOperands& op, const uint32_t* pairs, int64_t n0, int64_t n1) {
  InPassesOfUpTo<8>(op.rows, [&](auto rows, int64_t r) {
    Chunk<decltype(rows)::value>(op, pairs, r, n0, n1);
  });
}

}  // namespace placer::model

#pragma GCC diagnostic pop
