#!/usr/bin/env bash
# `make serve` (scripts/serve.sh) on a fresh build directory: it writes the demo model, which is
# BF16 like most Hub checkpoints, and placerd serves it as BF16 (--dtype auto) through gRPC;
# MODEL=DIR serves another checkpoint, an F32 one as F32; SIGTERM (Ctrl-C) stops it cleanly.
#   serve_test.sh SOURCE_DIR PLACERD PLACER PLACER_MAKE_CHECKPOINT
set -euo pipefail
source_dir=$1 placerd=$2 placer=$3 make_checkpoint=$4
work=$(mktemp -d)
server=""
cleanup() { [[ -n $server ]] && kill -9 "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
# A build directory of its own, so the demo is written fresh.
mkdir -p "$work/build"
ln -s "$placerd" "$work/build/placerd"
ln -s "$make_checkpoint" "$work/build/placer-make-checkpoint"
# A free port below the ephemeral range (one from the range can be handed to any outgoing
# connection before placerd binds it; tests/e2e/daemon_process.h).
port() {
  /usr/bin/python3 -c '
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
while True:
    port = random.randint(10000, low - 1)
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
    print(port)
    break'
}

# serve [ENV...]: start scripts/serve.sh in the background, wait for SERVING, write its
# ModelInfo to $work/info.json (not a $(...) subshell: `server` must stay set here).
serve() {
  local target="127.0.0.1:$(port)" metrics="127.0.0.1:$(port)"
  env "$@" bash "$source_dir/scripts/serve.sh" "$work/build" "$target" "$metrics" >"$work/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 300); do
    if "$placer" --target "$target" --timeout 1 health >/dev/null 2>&1; then
      "$placer" --target "$target" info --json >"$work/info.json"
      return 0
    fi
    kill -0 "$server" 2>/dev/null || break
    sleep 0.2
  done
  echo "serve.sh did not become SERVING:" >&2; cat "$work/serve.log" >&2; return 1
}
stop() {
  kill -TERM "$server"
  local code=0; wait "$server" || code=$?
  server=""
  [[ $code == 0 ]] || { echo "placerd exited $code after SIGTERM:" >&2; cat "$work/serve.log" >&2; exit 1; }
}
field() { /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

serve
info=$(cat "$work/info.json")
[[ -f $work/build/models/demo/config.json ]] || { echo "no demo model was written" >&2; exit 1; }
grep -q '"torch_dtype": *"bfloat16"' "$work/build/models/demo/config.json" ||
  { echo "the demo model is not BF16:" >&2; cat "$work/build/models/demo/config.json" >&2; exit 1; }
dtype=$(field compute_dtype <<<"$info")
[[ $dtype == BF16 ]] || { echo "the demo is served as '$dtype', not BF16: $info" >&2; exit 1; }
grep -q "compute dtype BF16" "$work/serve.log" || { echo "the start log does not say compute dtype BF16:" >&2; cat "$work/serve.log" >&2; exit 1; }
stop

"$make_checkpoint" --out "$work/f32" --arch llama --preset tiny --seed 2 --dtype F32 >/dev/null
serve MODEL="$work/f32"
info=$(cat "$work/info.json")
dtype=$(field compute_dtype <<<"$info")
[[ $dtype == F32 ]] || { echo "MODEL=$work/f32 is served as '$dtype', not F32: $info" >&2; exit 1; }
path=$(field model_path <<<"$info")
[[ $path == */f32 || $path == */f32/ ]] || { echo "MODEL= served '$path', not the f32 checkpoint: $info" >&2; exit 1; }
stop
echo "serve.sh: demo served as BF16, MODEL= as F32"
