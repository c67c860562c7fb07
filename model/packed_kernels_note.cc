#include "model/packed_kernels_note.h"

#include "model/digit_tiles.h"
#include "model/packed_bf16_kernels.h"
#include "model/quantized_int4_digits.h"
#include "model/quantized_int8_digits.h"
#include "model/quantized_tiles.h"
#include "model/quantized_linear.h"

namespace placer::model {

std::string PackedKernelsNote(loader::DType compute) {
  if (compute != loader::DType::kF32 && compute != loader::DType::kBF16) return "";
  const std::string rows = compute == loader::DType::kF32 ? "F32" : "BF16";
  const QuantIsa isa = DetectQuantIsa();
  if (isa == QuantIsa::kNone) {
    return "packed kernels (" + rows + " rows): none on this CPU (neither AVX2 nor AVX-512): "
           "each packed weight is unpacked for ATen's product";
  }
  const std::string floats =
      std::string("the ") + (isa == QuantIsa::kAvx512 ? "AVX-512" : "AVX2") + " float kernels";
  const std::string int8_digits =
      Int8DigitsKernelRuns() ? "AVX512-VNNI for 8-bit weights in groups of 128s (each block of 128 "
                               "inputs as 24-bit integers, within 2^-22 of its largest input); "
                             : "";
  if (compute == loader::DType::kBF16 && PackedBf16KernelsRun()) {
    return "packed kernels (BF16 rows): " + int8_digits +
           "AVX512-BF16 vdpbf16ps for 4-bit weights in groups of 32s and " +
           (Int8DigitsKernelRuns() ? "other " : "") +
           "8-bit ones in groups of 64s (each code a BF16 number, exact)" +
           std::string(QuantizedTilesKernelRuns() ? "; AMX tdpbf16ps for prompt chunks of up to 64 "
                                                    "rows of 4-bit and 8-bit weights"
                                                  : "") +
           "; others: " + floats;
  }
  // Prompt chunks of packed weights on AMX CPUs (digit_tiles.h, quantized_tiles.h), said
  // first: they are most of a prompt's time.
  std::string tiles;
  if (compute == loader::DType::kF32 && DigitTilesRun()) {
    tiles = "AMX-INT8 for prompt chunks of 4-bit and 8-bit weights in groups of 128s (each block "
            "of 128 inputs as 24-bit integers, within 2^-22 of its largest input)" +
            std::string(QuantizedTilesKernelRuns()
                            ? " and AMX tdpbf16ps for other groups of 64 or more (each input as "
                              "three BF16 parts, exact products)"
                            : "") +
            "; ";
  } else if (compute == loader::DType::kF32 && QuantizedTilesKernelRuns()) {
    tiles = "AMX tdpbf16ps for prompt chunks of 4-bit and 8-bit weights in groups of 64 or more "
            "(each input as three BF16 parts, exact products); ";
  }
  if (compute == loader::DType::kF32 && DigitsVnniRuns()) {
    return "packed kernels (F32 rows): " + tiles +
           "AVX512-VNNI for 4-bit weights in groups of 128s, decode steps" +
           (tiles.empty() ? " and prompt chunks of 17-32 or over 128 rows" : "") +
           " (each block of 128 inputs as 24-bit integers, within 2^-22 of its largest input" +
           (tiles.empty() ? "; chunks of 33-128 rows unpack each task's weight rows for the F32 "
                            "prompt-chunk kernel"
                          : "") +
           "); others: " + floats;
  }
  if (!tiles.empty()) return "packed kernels (F32 rows): " + tiles + "others: " + floats;
  if (isa == QuantIsa::kAvx2 && Int4DigitsKernelRuns()) {
    // F32 and BF16 rows alike on AVX2 alone (BF16 ones widened).
    return "packed kernels (" + rows + " rows): AVX2 vpmaddubsw for 4-bit weights in groups of "
           "128s, decode steps of up to 16 rows (each block of 128 inputs as 24-bit integers, "
           "within 2^-22 of its largest input); prompt chunks of 17-192 rows (25-192 of 8-bit "
           "weights) unpack each task's weight rows for the F32 prompt-chunk kernel; others: " +
           floats;
  }
  if (compute == loader::DType::kBF16 && !int8_digits.empty()) {
    return "packed kernels (BF16 rows): " + int8_digits + "others: " + floats;
  }
  return "packed kernels (" + rows + " rows): " + floats;
}

}  // namespace placer::model
