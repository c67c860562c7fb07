#!/usr/bin/env bash
# Builds the loader's, the tokenizer's and the request parser's (proto/wire) libFuzzer
# targets with clang (ASan + UBSan) in build-fuzz/ and runs each for a share of SECONDS
# from a seed corpus that the checkpoint writer makes (request_wire, infer_request, stage_wire: their saved inputs). Crashes are left in build-fuzz/artifacts-*/;
# copy reproducers into tests/fuzz/regressions/<target>/ so ctest keeps them.
#   tests/fuzz/run.sh SECONDS [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:?usage: tests/fuzz/run.sh SECONDS [TARGET...]}
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors_header shard_index model_config quantize_config tokenizer_json tokenizer_text request_wire infer_request stage_wire)
build=build-fuzz

command -v clang++ >/dev/null || { echo "run.sh: clang++ is required" >&2; exit 1; }
CC=clang CXX=clang++ cmake -S tests/fuzz -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2

"$build/make_seed_corpus" "$build/seeds"
per_target=$(( seconds / ${#targets[@]} ))
[ "$per_target" -gt 0 ] || per_target=1
status=0
for target in "${targets[@]}"; do
  corpus=tests/fuzz/corpus-$target
  artifacts=$build/artifacts-$target
  mkdir -p "$corpus" "$artifacts" "$build/seeds/$target" "tests/fuzz/regressions/$target"
  echo "== $target: ${per_target}s"
  # One worker: the build machines have two cores.
  "$build/${target}_fuzzer" "$corpus" "$build/seeds/$target" "tests/fuzz/regressions/$target" \
      -max_total_time="$per_target" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="$artifacts/" -print_final_stats=1 || status=$?
done
exit $status
