// The parallel tasks of one call over several weights of one input (a layer's q, k and v): each
// weight's outputs cut into tasks of `outputs_per_task`, the weights' tasks numbered one after
// another, so one SpinningWorkers loop runs them all and waits for its slowest thread once.
// Header-only: the kernels' loops call it for every chunk of tasks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace placer::model {

class WeightTasks {
 public:
  explicit WeightTasks(int64_t outputs_per_task) : outputs_per_task_(outputs_per_task) {}

  // Appends a weight of `outputs` outputs (0: no tasks); weights are numbered in this order.
  void Add(int64_t outputs) {
    outputs_.push_back(outputs);
    first_.push_back(first_.back() + (outputs + outputs_per_task_ - 1) / outputs_per_task_);
  }

  // Tasks of every weight added.
  int64_t count() const { return first_.back(); }

  // For each weight whose tasks meet [begin, end): fn(weight, n0, n1) with the outputs [n0, n1)
  // of those tasks, in weight order. A task's outputs are the same whatever chunk it falls in.
  template <typename Fn>
  void ForEachRun(int64_t begin, int64_t end, const Fn& fn) const {
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const int64_t first = std::max(begin, first_[i]), last = std::min(end, first_[i + 1]);
      if (first >= last) continue;
      fn(i, (first - first_[i]) * outputs_per_task_,
         std::min(outputs_[i], (last - first_[i]) * outputs_per_task_));
    }
  }

 private:
  int64_t outputs_per_task_;
  std::vector<int64_t> outputs_;
  std::vector<int64_t> first_ = {0};  // each weight's first task, then count()
};

}  // namespace placer::model
