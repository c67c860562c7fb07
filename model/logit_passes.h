// The passes over a row of logits that the sampler makes for every generated token: its
// largest value, where that value first occurs, and the softmax weights exp((s - best) / T).
//
// A vocabulary is 32K-256K logits and every pass runs on the engine thread between two forward
// passes, so each is one vectorized sweep (AVX-512F where the CPU has it, else a scalar loop
// with the same results up to the exp's rounding): std::max_element over 32000 floats took
// ~95 us, a temperature draw that sorted the vocabulary ~3-4 ms, against a ~2 ms decode step
// of the small preset.
//
// NaN logits are skipped as if they were -infinity: never the largest, weight 0.
#pragma once

#include <cstdint>

namespace placer::model {

// The largest non-NaN value of s[0, n); -infinity when there is none (n = 0, all NaN).
float LargestLogit(const float* s, int64_t n);

// The first i with s[i] == value, or n when there is none.
int64_t FirstIndexOf(const float* s, int64_t n, float value);

// w[i] = exp((s[i] - largest) / temperature) for i in [0, n), each within a few float32 ulp of
// the exact value (0 for NaN logits and below float32's range), and their sum in float64.
// Requires a finite `largest` >= every s[i] and temperature > 0.
double SoftmaxWeights(const float* s, int64_t n, float largest, float temperature, float* w);

// The same passes without AVX-512 (what other CPUs run), for tests on CPUs that have it.
float LargestLogitScalar(const float* s, int64_t n);
int64_t FirstIndexOfScalar(const float* s, int64_t n, float value);
double SoftmaxWeightsScalar(const float* s, int64_t n, float largest, float temperature, float* w);

// Whether this CPU runs the AVX-512 passes.
bool LogitPassesVectorized();

}  // namespace placer::model
