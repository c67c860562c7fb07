// WeightTasks: every output of every weight in exactly one task, whatever chunks the loop cuts.
#include "model/weight_tasks.h"

#include <gtest/gtest.h>

#include <vector>

namespace placer::model {
namespace {

TEST(WeightTasks, EveryOutputOnceInWeightOrderForAnyChunks) {
  WeightTasks tasks(4);
  const std::vector<int64_t> outputs = {3, 0, 8, 9, 4};  // below, none, two whole, a tail, one
  for (int64_t out : outputs) tasks.Add(out);
  EXPECT_EQ(tasks.count(), 1 + 0 + 2 + 3 + 1);
  for (int64_t chunk : {1, 2, 3, 7}) {
    std::vector<std::vector<int>> seen(outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) seen[i].assign(static_cast<size_t>(outputs[i]), 0);
    size_t last_weight = 0;
    for (int64_t begin = 0; begin < tasks.count(); begin += chunk) {
      tasks.ForEachRun(begin, std::min(tasks.count(), begin + chunk), [&](size_t i, int64_t n0, int64_t n1) {
        EXPECT_GE(i, last_weight) << "weights in order";
        EXPECT_LT(n0, n1) << "no empty run";
        EXPECT_EQ(n0 % 4, 0) << "runs start at a task";
        last_weight = i;
        for (int64_t n = n0; n < n1; ++n) ++seen[i][static_cast<size_t>(n)];
      });
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      for (int count : seen[i]) EXPECT_EQ(count, 1) << "weight " << i << ", chunks of " << chunk;
    }
  }
}

}  // namespace
}  // namespace placer::model
