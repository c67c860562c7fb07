// What one parallel loop of a decode step costs beyond its tasks' work: SpinningWorkers (the
// helpers every packed product, attention and norm loop runs on) handing out loops of busy-wait
// tasks, against the loop's work divided by its threads.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

namespace placer::bench {

// For loops of 2, 8, 16, 32 and 86 tasks (a decode step's products have 4-88 tasks of 64
// outputs) of 0, 1 and 4 microseconds each: {"threads", "loops", "points": [{"tasks",
// "task_us", "loop_us" (median of `batches` batches of `loops` loops each), "ideal_us" (tasks x
// task_us / threads), "overhead_us"}]}. Threads: at::get_num_threads() (the caller sets them).
nlohmann::json MeasureLoopHandoff(int loops, int batches);

}  // namespace placer::bench
