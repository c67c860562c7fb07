#!/bin/bash
# The llama.cpp peer of bench/run on the tiny preset: it builds (cached in BUILD/llama.cpp),
# converts F32 and BF16 safetensors to GGUF, quantizes the F32 one to Q8_0 and Q4_0 with
# llama-quantize, runs llama-bench on each, and the collector parses the figures. ctest label `llama_cpp`; `make test` leaves it out (building llama.cpp takes minutes):
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
for quant in int8:Q8_0 int4:Q4_0; do
  label=${quant%:*}; type=${quant#*:}
  bash "$source_dir/bench/peers/llama_cpp.sh" quantize "$build_dir" "$work/tiny-F32.gguf" \
    "$work/tiny-$type.gguf" "$type"
  # The quantized file is smaller than the F32 one it came from, and llama-quantize says which
  # type it wrote (a wrong or missing type would bench the F32 weights under a quantized name).
  [[ $(stat -c %s "$work/tiny-$type.gguf") -lt $(stat -c %s "$work/tiny-F32.gguf") ]]
  grep -qi "converting to $type" "$work/tiny-$type.gguf.log"
  "$bench" -m "$work/tiny-$type.gguf" -t 1 -p 8 -n 4 -r 1 -o json >"$work/llama_cpp_small_${label}_1.json"
  echo '{"step_seconds": [[0.01, 0.01, 0.01]], "ttft_seconds": [0.02]}' >"$work/placer_grpc_small_$label.jsonl"
done
/usr/bin/python3 - "$source_dir/bench" "$work" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from sections_model import llama_cpp_rows
results = {}
rows = llama_cpp_rows(sys.argv[2], 8, results)
assert len(rows) == 8, rows
for label in ("F32", "BF16", "int8", "int4"):
    peer = results[f"llama_cpp_small_{label}"]
    assert peer["decode_tokens_per_second"] > 0 and peer["prefill_tokens_per_second"] > 0, peer
for label, peer_type in (("int8", "Q8_0"), ("int4", "Q4_0")):
    peer = results[f"llama_cpp_small_{label}"]
    assert peer["llama_cpp_type"] == peer_type, peer
    # llama-bench names the weights' type in each record.
    assert all(peer_type in t["model_type"] for r in peer["runs"] for t in r), peer["runs"]
    prefill = [r for r in rows if r["metric"].startswith("prompt") and f", {label}:" in r["metric"]]
    assert len(prefill) == 1 and prefill[0]["goal"] == "≥ 0.8", prefill
print("\n".join(r["summary"] for r in rows))
PY
