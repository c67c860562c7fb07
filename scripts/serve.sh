#!/usr/bin/env bash
# `make serve`: start placerd in the foreground on the built-in demo model, creating the demo
# checkpoint (seeded random weights, Llama layout, BF16 like most checkpoints on the Hub) under
# BUILD_DIR/models/demo if missing. MODEL=DIR (`make serve MODEL=DIR`) serves that checkpoint
# instead; either way in the checkpoint's own dtype (--dtype auto).
set -euo pipefail
build_dir=${1:-build}
listen=${2:-127.0.0.1:50051}
metrics_listen=${3:-127.0.0.1:9400}
demo="$build_dir/models/demo"

model_args=()
if [ -n "${MODEL:-}" ]; then
  model_args=(--model "$MODEL")
elif [ -x "$build_dir/placer-make-checkpoint" ]; then
  if [ ! -f "$demo/config.json" ]; then
    echo "serve: writing the demo model to $demo"
    "$build_dir/placer-make-checkpoint" --out "$demo" --arch llama --preset tiny --seed 1 --dtype BF16
  fi
  model_args=(--model "$demo")
fi

echo "serve: placerd on $listen (metrics on http://$metrics_listen/metrics); Ctrl-C drains and stops it"
exec "$build_dir/placerd" --listen "$listen" --metrics-listen "$metrics_listen" "${model_args[@]}"
