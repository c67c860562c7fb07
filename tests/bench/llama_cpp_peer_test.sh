#!/bin/bash
# The llama.cpp peer of bench/run on the tiny preset: it builds (cached in BUILD/llama.cpp),
# converts F32 and BF16 safetensors to GGUF, runs llama-bench, and the collector parses the
# figures. ctest label `llama_cpp`; `make test` leaves it out (building llama.cpp takes minutes):
#   cd build && ctest -L llama_cpp --output-on-failure
set -euo pipefail
source_dir=${1:?SOURCE_DIR}; build_dir=${2:?BUILD_DIR}; make_checkpoint=${3:?placer-make-checkpoint}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
bench=$(bash "$source_dir/bench/peers/llama_cpp.sh" build "$build_dir")
for dtype in F32 BF16; do
  "$make_checkpoint" --out "$work/tiny-$dtype" --arch llama --preset tiny --seed 1 --dtype "$dtype" >/dev/null
  bash "$source_dir/bench/peers/llama_cpp.sh" gguf "$build_dir" "$work/tiny-$dtype" "$work/tiny-$dtype.gguf"
  "$bench" -m "$work/tiny-$dtype.gguf" -t 1 -p 8 -n 4 -r 1 -o json >"$work/llama_cpp_small_${dtype}_1.json"
  # A placer side for the collector to pair with: one gRPC-bench-shaped record (filed as the
  # small preset's: the collector's names, model_dtype).
  echo '{"step_seconds": [[0.01, 0.01, 0.01]], "ttft_seconds": [0.02]}' >"$work/placer_grpc_small_$dtype.jsonl"
done
/usr/bin/python3 - "$source_dir/bench" "$work" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from sections_model import llama_cpp_rows
results = {}
rows = llama_cpp_rows(sys.argv[2], 8, results)
assert len(rows) == 4, rows
for dtype in ("F32", "BF16"):
    peer = results[f"llama_cpp_small_{dtype}"]
    assert peer["decode_tokens_per_second"] > 0 and peer["prefill_tokens_per_second"] > 0, peer
print("\n".join(r["summary"] for r in rows))
PY
