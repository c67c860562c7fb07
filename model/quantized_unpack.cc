// The unpacking of quantized_unpack.h. Every weight is the one fused multiply-add
// fma(q, s, m) in float32 (vector and scalar fma round alike), so the result is the scalar
// loader's; the bfloat16 rounding is c10's, done on the integer bits (a lane's bits plus
// 0x7FFF plus its 17th bit, shifted down 16) rather than with vcvtneps2bf16, which flushes
// denormals to zero where c10 keeps them.
#include "model/quantized_unpack.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "loader/quantized_layout.h"
#include "model/bf16_rounding.h"

namespace placer::model {
namespace {

using loader::kPackedBlockHeaderBytes;

inline void ReadHeader(const uint8_t* block, float* scale, float* offset) {
  std::memcpy(scale, block, sizeof(float));
  std::memcpy(offset, block + sizeof(float), sizeof(float));
}

inline uint16_t RoundToBf16(float value) {
  if (std::isnan(value)) return 0x7FC0;
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return static_cast<uint16_t>((bits + ((bits >> 16) & 1) + 0x7FFF) >> 16);
}

inline void PutScalar(float* out, float w) { *out = w; }
inline void PutScalar(uint16_t* out, float w) { *out = RoundToBf16(w); }

// ---- AVX-512: 16 lanes.

__attribute__((target("avx512f,avx512bw,fma"), always_inline)) inline void Put16(float* out,
                                                                                 __m512 w) {
  _mm512_storeu_ps(out, w);
}

__attribute__((target("avx512f,avx512bw,fma"), always_inline)) inline void Put16(uint16_t* out,
                                                                                 __m512 w) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), RoundToBf16Bits(w));
}

template <typename Out>
__attribute__((target("avx512f,avx512bw,fma"))) void Rows512(const UnpackOperands& op, int64_t n0,
                                                            int64_t n1, Out* out) {
  const int64_t gs = op.group_size;
  const __m512i low_nibble = _mm512_set1_epi32(0xF);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* block = op.w + n * op.groups * op.block_bytes;
    Out* row = out + n * op.in;
    for (int64_t g = 0; g < op.groups; ++g, block += op.block_bytes, row += gs) {
      float scale, offset;
      ReadHeader(block, &scale, &offset);
      const __m512 s = _mm512_set1_ps(scale), m = _mm512_set1_ps(offset);
      const uint8_t* codes = block + kPackedBlockHeaderBytes;
      if (op.bits == 4) {
        // 16 bytes hold 32 inputs: byte j is input j (low nibble) and j + 16 (high nibble).
        for (int64_t c = 0; c < gs; c += 32) {
          const __m512i bytes =
              _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + c / 2)));
          const __m512i low = _mm512_and_si512(bytes, low_nibble);
          const __m512i high = _mm512_srli_epi32(bytes, 4);
          Put16(row + c, _mm512_fmadd_ps(_mm512_cvtepi32_ps(low), s, m));
          Put16(row + c + 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(high), s, m));
        }
        continue;
      }
      int64_t c = 0;
      for (; c + 16 <= gs; c += 16) {
        const __m512i q =
            _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + c)));
        Put16(row + c, _mm512_fmadd_ps(_mm512_cvtepi32_ps(q), s, m));
      }
      for (; c < gs; ++c) {
        PutScalar(row + c, __builtin_fmaf(static_cast<float>(static_cast<int8_t>(codes[c])), scale, offset));
      }
    }
  }
}

// ---- AVX2: 8 lanes.

__attribute__((target("avx2,fma"), always_inline)) inline void Put8(float* out, __m256 w) {
  _mm256_storeu_ps(out, w);
}

__attribute__((target("avx2,fma"), always_inline)) inline void Put8(uint16_t* out, __m256 w) {
  const __m256i bits = _mm256_castps_si256(w);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7FFF))), 16);
  const __m256 nan = _mm256_cmp_ps(w, w, _CMP_UNORD_Q);
  rounded = _mm256_blendv_epi8(rounded, _mm256_set1_epi32(0x7FC0), _mm256_castps_si256(nan));
  // Eight 16-bit values: packed within each 128-bit lane, then the two lanes' low halves joined.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(rounded, rounded), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(packed));
}

template <typename Out>
__attribute__((target("avx2,fma"))) void Rows256(const UnpackOperands& op, int64_t n0, int64_t n1,
                                                 Out* out) {
  const int64_t gs = op.group_size;
  const __m256i low_nibble = _mm256_set1_epi32(0xF);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* block = op.w + n * op.groups * op.block_bytes;
    Out* row = out + n * op.in;
    for (int64_t g = 0; g < op.groups; ++g, block += op.block_bytes, row += gs) {
      float scale, offset;
      ReadHeader(block, &scale, &offset);
      const __m256 s = _mm256_set1_ps(scale), m = _mm256_set1_ps(offset);
      const uint8_t* codes = block + kPackedBlockHeaderBytes;
      if (op.bits == 4) {
        for (int64_t c = 0; c < gs; c += 32) {
          for (int half = 0; half < 2; ++half) {  // bytes 0-7, then 8-15 of the 16
            const __m256i bytes = _mm256_cvtepu8_epi32(
                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + c / 2 + 8 * half)));
            const __m256i low = _mm256_and_si256(bytes, low_nibble);
            const __m256i high = _mm256_srli_epi32(bytes, 4);
            Put8(row + c + 8 * half, _mm256_fmadd_ps(_mm256_cvtepi32_ps(low), s, m));
            Put8(row + c + 16 + 8 * half, _mm256_fmadd_ps(_mm256_cvtepi32_ps(high), s, m));
          }
        }
        continue;
      }
      int64_t c = 0;
      for (; c + 8 <= gs; c += 8) {
        const __m256i q =
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + c)));
        Put8(row + c, _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), s, m));
      }
      for (; c < gs; ++c) {
        PutScalar(row + c, __builtin_fmaf(static_cast<float>(static_cast<int8_t>(codes[c])), scale, offset));
      }
    }
  }
}

}  // namespace

void UnpackRowsAvx512(const UnpackOperands& op, int64_t n0, int64_t n1, float* out) {
  Rows512(op, n0, n1, out);
}
void UnpackRowsAvx512(const UnpackOperands& op, int64_t n0, int64_t n1, uint16_t* bf16_out) {
  Rows512(op, n0, n1, bf16_out);
}
void UnpackRowsAvx2(const UnpackOperands& op, int64_t n0, int64_t n1, float* out) {
  Rows256(op, n0, n1, out);
}
void UnpackRowsAvx2(const UnpackOperands& op, int64_t n0, int64_t n1, uint16_t* bf16_out) {
  Rows256(op, n0, n1, bf16_out);
}

}  // namespace placer::model

#pragma GCC diagnostic pop
