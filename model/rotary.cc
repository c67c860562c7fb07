#include "model/rotary.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace placer::model {
namespace {

at::Tensor DefaultInverseFrequencies(int64_t head_dim, double theta) {
  const at::Tensor exponents =
      at::arange(0, head_dim, 2, at::TensorOptions().dtype(at::kLong)).to(at::kFloat) /
      static_cast<double>(head_dim);
  return 1.0 / at::pow(theta, exponents);
}

// Llama 3.1: long wavelengths are slowed by `factor`, short ones kept, the band between
// interpolated smoothly.
at::Tensor Llama3InverseFrequencies(const at::Tensor& inverse_frequencies,
                                    const loader::RopeScaling& scaling,
                                    int64_t default_original_max) {
  const double factor = scaling.factor;
  const double low = scaling.low_freq_factor.value_or(1.0);
  const double high = scaling.high_freq_factor.value_or(4.0);
  const double original =
      static_cast<double>(scaling.original_max_position_embeddings.value_or(default_original_max));
  const double low_wavelength = original / low;
  const double high_wavelength = original / high;
  const at::Tensor wavelength = 2 * M_PI / inverse_frequencies;
  at::Tensor scaled =
      at::where(wavelength > low_wavelength, inverse_frequencies / factor, inverse_frequencies);
  const at::Tensor smooth = (original / wavelength - low) / (high - low);
  const at::Tensor smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
  const at::Tensor medium = (wavelength >= high_wavelength).logical_and(wavelength <= low_wavelength);
  return at::where(medium, smoothed, scaled);
}

at::Tensor RotateHalf(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

// cos and sin of the angles position x inverse frequency, [positions][half].
struct AngleTable {
  std::vector<float> inverse;
  std::vector<int64_t> positions;
  std::vector<float> cos, sin;

  bool Holds(const float* frequencies, int64_t half, const std::vector<int64_t>& at) const {
    // Bits, not values: NaN never matches itself, and -0 and +0 give sines of either sign.
    return static_cast<int64_t>(inverse.size()) == half && positions == at &&
           std::memcmp(inverse.data(), frequencies, sizeof(float) * static_cast<size_t>(half)) == 0;
  }
};

// x [T, heads, d] float32 or BF16 on the CPU rotated in one pass: x * cos + rotate_half(x) * sin
// with cos and sin [T, d / 2] (each frequency serves both halves of the head, as transformers'
// cat((freqs, freqs)) does). The products and the sum round as ATen's three operations do: in
// BF16, cos and sin rounded to BF16 first (transformers casts them to the activations' dtype)
// and each product and the sum rounded to BF16.
template <typename T>
at::Tensor RotateRows(const at::Tensor& x, const std::vector<float>& cos,
                      const std::vector<float>& sin) {
  const at::Tensor in = x.contiguous();
  at::Tensor out = at::empty(in.sizes(), in.options());  // not empty_like: no layout to follow
  const int64_t rows = in.size(0), heads = in.size(1), half = in.size(2) / 2;
  const T* src = in.data_ptr<T>();
  T* dst = out.data_ptr<T>();
  // Rounds to T: nothing for float32, BF16's round-to-nearest-even for BF16.
  const auto round = [](float v) { return static_cast<float>(T(v)); };
  for (int64_t t = 0; t < rows; ++t) {
    const float* c = cos.data() + t * half;
    const float* s = sin.data() + t * half;
    for (int64_t h = 0; h < heads; ++h) {
      const T* xr = src + (t * heads + h) * 2 * half;
      T* yr = dst + (t * heads + h) * 2 * half;
      for (int64_t i = 0; i < half; ++i) {
        const float ci = round(c[i]), si = round(s[i]);
        const float x1 = static_cast<float>(xr[i]), x2 = static_cast<float>(xr[i + half]);
        const float first = round(x1 * ci), second = round(x2 * ci);
        const float first_rotated = round(x2 * si), second_rotated = round(x1 * si);
        yr[i] = T(first - first_rotated);
        yr[i + half] = T(second + second_rotated);
      }
    }
  }
  return out;
}

bool RowsOnCpu(const at::Tensor& x) {
  return x.device().is_cpu() &&
         (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16) &&
         x.layout() == at::kStrided && x.dim() == 3 && x.size(2) % 2 == 0;
}

}  // namespace

RotaryEmbedding::RotaryEmbedding(const loader::ModelConfig& config)
    : head_dim_(config.head_dim),
      theta_(config.rope_theta),
      max_positions_(config.max_position_embeddings),
      scaling_(config.rope_scaling) {
  base_inverse_frequencies_ = DefaultInverseFrequencies(head_dim_, theta_);
  if (scaling_ && scaling_->rope_type == "llama3") {
    base_inverse_frequencies_ =
        Llama3InverseFrequencies(base_inverse_frequencies_, *scaling_, max_positions_);
  } else if (scaling_ && scaling_->rope_type == "linear") {
    base_inverse_frequencies_ = base_inverse_frequencies_ / scaling_->factor;
  }
}

at::Tensor RotaryEmbedding::InverseFrequencies(int64_t sequence_length) const {
  if (scaling_ && scaling_->rope_type == "dynamic" && sequence_length > max_positions_) {
    const double factor = scaling_->factor;
    const double base =
        theta_ * std::pow(factor * sequence_length / max_positions_ - (factor - 1),
                          static_cast<double>(head_dim_) / (head_dim_ - 2));
    return DefaultInverseFrequencies(head_dim_, base);
  }
  return base_inverse_frequencies_;
}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::Apply(const at::Tensor& q, const at::Tensor& k,
                                                         int64_t start) const {
  const int64_t length = q.size(1);
  const at::Tensor positions =
      at::arange(start, start + length, at::TensorOptions().dtype(at::kLong)).to(at::kFloat);
  const at::Tensor frequencies = at::outer(positions, InverseFrequencies(start + length));
  const at::Tensor angles = at::cat({frequencies, frequencies}, -1);
  const at::Tensor cos = angles.cos().to(q.device(), q.scalar_type());
  const at::Tensor sin = angles.sin().to(q.device(), q.scalar_type());
  return {q * cos + RotateHalf(q) * sin, k * cos + RotateHalf(k) * sin};
}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::ApplyRows(
    const at::Tensor& q, const at::Tensor& k, const std::vector<int64_t>& positions) const {
  const int64_t half = head_dim_ / 2;
  if (RowsOnCpu(q) && RowsOnCpu(k) && q.scalar_type() == k.scalar_type() &&
      q.size(2) == head_dim_ && k.size(2) == head_dim_ && base_inverse_frequencies_.numel() == half) {
    // A decode step's rows: the ~20 ATen operations below cost more than the arithmetic.
    const bool as_is = base_inverse_frequencies_.scalar_type() == at::kFloat &&
                       base_inverse_frequencies_.is_contiguous();
    const at::Tensor frequencies =
        as_is ? base_inverse_frequencies_ : base_inverse_frequencies_.to(at::kFloat).contiguous();
    const float* inverse = frequencies.data_ptr<float>();
    // Every layer of a step asks for the same positions: the last table of this thread is
    // kept, keyed by the frequencies' bits and the positions (a prompt chunk's 64 x 32 angles
    // are ~4000 std::cos and std::sin calls, ~2 % of a small-preset prefill, once per layer).
    thread_local AngleTable table;
    if (!table.Holds(inverse, half, positions)) {
      table.inverse.assign(inverse, inverse + half);
      table.positions = positions;
      table.cos.resize(positions.size() * static_cast<size_t>(half));
      table.sin.resize(table.cos.size());
      for (size_t t = 0; t < positions.size(); ++t) {
        for (int64_t i = 0; i < half; ++i) {
          // float(position) * frequency in float32, as at::outer computes the angles.
          const float angle = static_cast<float>(positions[t]) * inverse[i];
          table.cos[t * half + i] = std::cos(angle);
          table.sin[t * half + i] = std::sin(angle);
        }
      }
    }
    const std::vector<float>& cos = table.cos;
    const std::vector<float>& sin = table.sin;
    if (q.scalar_type() == at::kBFloat16) {
      return {RotateRows<c10::BFloat16>(q, cos, sin), RotateRows<c10::BFloat16>(k, cos, sin)};
    }
    return {RotateRows<float>(q, cos, sin), RotateRows<float>(k, cos, sin)};
  }
  const at::Tensor rows = at::tensor(positions, at::kLong).to(at::kFloat);
  const at::Tensor frequencies = at::outer(rows, base_inverse_frequencies_);
  const at::Tensor angles = at::cat({frequencies, frequencies}, -1).unsqueeze(1);  // [T, 1, d]
  const at::Tensor cos = angles.cos().to(q.device(), q.scalar_type());
  const at::Tensor sin = angles.sin().to(q.device(), q.scalar_type());
  return {q * cos + RotateHalf(q) * sin, k * cos + RotateHalf(k) * sin};
}

}  // namespace placer::model
