// Rotary embeddings: the one-pass float32 rows path (a decode step's rows) gives what the
// general ATen formula (transformers' q * cos + rotate_half(q) * sin) gives, row by row.
#include "model/rotary.h"

#include <gtest/gtest.h>

#include <vector>

namespace placer::model {
namespace {

// transformers' formula in float64, positions per row.
at::Tensor Reference(const at::Tensor& x, const std::vector<int64_t>& positions, int64_t head_dim,
                     double theta) {
  const at::Tensor inverse =
      1.0 / at::pow(theta, at::arange(0, head_dim, 2, at::kDouble) / static_cast<double>(head_dim));
  const at::Tensor angles = at::outer(at::tensor(positions, at::kLong).to(at::kDouble), inverse);
  const at::Tensor both = at::cat({angles, angles}, -1).unsqueeze(1);
  const at::Tensor x64 = x.to(at::kDouble);
  const int64_t half = head_dim / 2;
  const at::Tensor rotated = at::cat({-x64.slice(-1, half), x64.slice(-1, 0, half)}, -1);
  return x64 * both.cos() + rotated * both.sin();
}

// Llama's defaults for a 64-wide head.
loader::ModelConfig HeadDim64Config() {
  loader::ModelConfig config;
  config.head_dim = 64;
  config.rope_theta = 10000.0;
  config.max_position_embeddings = 4096;
  return config;
}

TEST(RotaryRows, FloatRowsMatchTransformersFormulaAtEveryPosition) {
  const RotaryEmbedding rotary(HeadDim64Config());
  at::manual_seed(9);
  const std::vector<int64_t> positions = {0, 1, 7, 100, 2047, 5};
  const at::Tensor q = at::randn({6, 4, 64});
  const at::Tensor k = at::randn({6, 2, 64});
  const auto [q_rotated, k_rotated] = rotary.ApplyRows(q, k, positions);
  ASSERT_EQ(q_rotated.sizes(), q.sizes());
  ASSERT_EQ(k_rotated.sizes(), k.sizes());
  // The angles are rounded to float32 as transformers rounds them: at position 2047 that
  // moves the result by up to ~2047 * 2^-24 relative to float64 angles.
  EXPECT_LT((q_rotated.to(at::kDouble) - Reference(q, positions, 64, 10000.0)).abs().max().item<double>(), 1e-3);
  EXPECT_LT((k_rotated.to(at::kDouble) - Reference(k, positions, 64, 10000.0)).abs().max().item<double>(), 1e-3);
  // Position 0 leaves a row as it is; small positions are near float64.
  EXPECT_TRUE(at::allclose(q_rotated[0], q[0], 0, 1e-6));
  EXPECT_LT((q_rotated.slice(0, 1, 3).to(at::kDouble) - Reference(q, positions, 64, 10000.0).slice(0, 1, 3))
                .abs().max().item<double>(), 1e-5);
  // The same rows through the per-sequence path (Apply: [heads, T, d] at start 0) agree.
  const std::vector<int64_t> sequence = {0, 1, 2, 3};
  const at::Tensor q4 = q.slice(0, 0, 4), k4 = k.slice(0, 0, 4);
  const auto [q_rows, k_rows] = rotary.ApplyRows(q4, k4, sequence);
  const auto [q_seq, k_seq] = rotary.Apply(q4.transpose(0, 1), k4.transpose(0, 1), 0);
  EXPECT_TRUE(at::allclose(q_rows, q_seq.transpose(0, 1), 1e-6, 1e-6));
  EXPECT_TRUE(at::allclose(k_rows, k_seq.transpose(0, 1), 1e-6, 1e-6));
  // A row rotated alone is the row rotated in the batch.
  const auto [q_alone, k_alone] = rotary.ApplyRows(q.slice(0, 3, 4), k.slice(0, 3, 4), {100});
  EXPECT_TRUE(at::equal(q_alone[0], q_rotated[3]));
  EXPECT_TRUE(at::equal(k_alone[0], k_rotated[3]));
}

TEST(RotaryRows, TheAnglesKeptForTheNextLayerNeverServeOtherFrequenciesOrPositions) {
  // ApplyRows keeps the last cos / sin table of its thread for the next layer's call: two
  // models with other thetas, and other positions, alternating, each get their own angles.
  loader::ModelConfig other = HeadDim64Config();
  other.rope_theta = 500000.0;
  const RotaryEmbedding llama2(HeadDim64Config());
  const RotaryEmbedding llama3(other);
  at::manual_seed(11);
  const at::Tensor q = at::randn({3, 4, 64});
  const at::Tensor k = at::randn({3, 2, 64});
  const std::vector<std::vector<int64_t>> steps = {{5, 6, 7}, {5, 6, 7}, {5, 6, 8}, {0, 1, 2}};
  for (const std::vector<int64_t>& positions : steps) {
    for (int repeat = 0; repeat < 2; ++repeat) {
      for (const auto& [rotary, theta] : {std::pair{&llama2, 10000.0}, std::pair{&llama3, 500000.0}}) {
        const auto [q_rotated, k_rotated] = rotary->ApplyRows(q, k, positions);
        EXPECT_LT((q_rotated.to(at::kDouble) - Reference(q, positions, 64, theta)).abs().max().item<double>(), 1e-5)
            << "theta " << theta << " first position " << positions[0];
        EXPECT_LT((k_rotated.to(at::kDouble) - Reference(k, positions, 64, theta)).abs().max().item<double>(), 1e-5);
      }
    }
  }
}

TEST(RotaryRows, Bf16RowsRoundAsTransformersBf16Arithmetic) {
  // A BF16 model: transformers casts cos and sin to BF16 and each product and the sum round to
  // BF16. The per-sequence path (Apply: ATen's operations) is that arithmetic.
  const RotaryEmbedding rotary(HeadDim64Config());
  at::manual_seed(10);
  const int64_t start = 37, length = 9;
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < length; ++i) positions.push_back(start + i);
  const at::Tensor q = (at::randn({length, 8, 64}) * 2).to(at::kBFloat16);
  const at::Tensor k = (at::randn({length, 2, 64}) * 2).to(at::kBFloat16);
  const auto [q_rows, k_rows] = rotary.ApplyRows(q, k, positions);
  ASSERT_EQ(q_rows.scalar_type(), at::kBFloat16);
  ASSERT_EQ(k_rows.sizes(), k.sizes());
  const auto [q_seq, k_seq] = rotary.Apply(q.transpose(0, 1), k.transpose(0, 1), start);
  for (const auto& [rows, aten] : {std::pair{q_rows, q_seq.transpose(0, 1)}, std::pair{k_rows, k_seq.transpose(0, 1)}}) {
    // cos and sin come from std::cos / std::sin here and from ATen's vectorised ones there:
    // a last-bit difference in float32 can move their BF16 rounding, rarely. Otherwise the
    // same bits.
    const int64_t differs = rows.ne(aten).sum().item<int64_t>();
    EXPECT_LE(differs, rows.numel() / 100);
    EXPECT_TRUE(at::allclose(rows.to(at::kFloat), aten.to(at::kFloat), 0.05, 0.05));
  }
  // Against float64 angles: within BF16 precision (cos, sin and three roundings, |x| ~ 2-8).
  EXPECT_LT((q_rows.to(at::kDouble) - Reference(q, positions, 64, 10000.0)).abs().max().item<double>(), 0.15);
  // A row rotated alone is the row rotated in the batch.
  const auto [q_alone, k_alone] = rotary.ApplyRows(q.slice(0, 4, 5), k.slice(0, 4, 5), {start + 4});
  EXPECT_TRUE(at::equal(q_alone[0], q_rows[4]));
  EXPECT_TRUE(at::equal(k_alone[0], k_rows[4]));
}

}  // namespace
}  // namespace placer::model
