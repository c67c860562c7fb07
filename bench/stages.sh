#!/usr/bin/env bash
# The cost of a pipeline hop (issue 21): decode tokens/s of a Llama checkpoint (bench/run: the
# `small` preset, 8 layers, hidden 768, F32) served by one placerd against the same model over
# 2 placerd stages on loopback (Gloo over TCP; leader: embeddings, the first layers, norm and
# head; worker: the other layers), alternated ROUNDS times through gRPC (placer-bench-grpc
# generate, batch 1, greedy, 16 prompt tokens), and the bytes the leader sends to stage 1
# (placer_stage_sent_bytes_total) over each request and over a 1-token request (the prompt's
# pass alone), so bytes per decode step = (request - prompt) / (NEW_TOKENS - 1).
#
#   bench/stages.sh    (bench/run's `stages` section runs it; standalone it writes its own model)
#
# Environment: BUILD_DIR (build), MODEL (default: a `small` checkpoint under
# BUILD_DIR/bench-models), ROUNDS (3), THREADS (2), NEW_TOKENS (64), LOG_DIR (the three
# placerds' logs; default a temporary directory removed at exit). Prints one JSON object per
# side and round.
set -euo pipefail
BUILD_DIR=${BUILD_DIR:-build}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
NEW_TOKENS=${NEW_TOKENS:-64}
PY=/usr/bin/python3
B=$(cd "$BUILD_DIR" && pwd)
MODEL=${MODEL:-$B/bench-models/stages-small}
if [[ ! -f "$MODEL/config.json" ]]; then
  "$B/placer-make-checkpoint" --out "$MODEL" --arch llama --preset small --seed 1 >/dev/null
fi
VOCAB=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]+"/config.json"))["vocab_size"])' "$MODEL")
WORK=$(mktemp -d)
LOG_DIR=${LOG_DIR:-$WORK}
mkdir -p "$LOG_DIR"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
NODE=(--model "$MODEL" --devices cuda:0=2GiB,cpu=4GiB --max-seq-len 512 --threads "$THREADS")
single=$(port); leader=$(port); worker=$(port); rendezvous=$(port); metrics=$(port)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
"$B/placerd" "${NODE[@]}" --listen "127.0.0.1:$single" --metrics-listen "" \
  >"$LOG_DIR/single.log" 2>&1 & pids+=($!)
GROUP=(--stages 2 --rendezvous "127.0.0.1:$rendezvous" --stage-listen 127.0.0.1 --stage-timeout 10s)
"$B/placerd" "${NODE[@]}" "${GROUP[@]}" --stage-rank 0 --listen "127.0.0.1:$leader" \
  --metrics-listen "127.0.0.1:$metrics" >"$LOG_DIR/leader.log" 2>&1 & pids+=($!)
"$B/placerd" "${NODE[@]}" "${GROUP[@]}" --stage-rank 1 --listen "127.0.0.1:$worker" \
  --metrics-listen "" >"$LOG_DIR/worker.log" 2>&1 & pids+=($!)
for target in $single $leader $worker; do
  for _ in $(seq 600); do
    if "$B/placer" --target "127.0.0.1:$target" --timeout 1 health >/dev/null 2>&1; then continue 2; fi
    sleep 0.2
  done
  echo "bench/stages.sh: placerd on port $target did not become SERVING; logs in $LOG_DIR:" >&2
  tail -5 "$LOG_DIR"/*.log >&2
  exit 1
done
sent() { curl -sf "127.0.0.1:$metrics/metrics" | awk '/^placer_stage_sent_bytes_total /{print $2}'; }
generate() {  # PORT NEW_TOKENS
  "$B/placer-bench-grpc" generate --target "127.0.0.1:$1" --vocab "$VOCAB" --streams 1 \
    --prompt-tokens 16 --new-tokens "$2" --variant 0
}
# Warm-up of both sides (first-pass allocations, page cache).
generate "$single" 3 >/dev/null
generate "$leader" 3 >/dev/null
for round in $(seq "$ROUNDS"); do
  echo "{\"round\": $round, \"side\": \"1 process\", \"result\": $(generate "$single" "$NEW_TOKENS")}"
  before=$(sent)
  result=$(generate "$leader" "$NEW_TOKENS")
  middle=$(sent)
  generate "$leader" 1 >/dev/null
  after=$(sent)
  echo "{\"round\": $round, \"side\": \"2 stages\", \"sent_bytes\": $("$PY" -c "print(int(float('$middle') - float('$before')))")," \
       "\"prompt_sent_bytes\": $("$PY" -c "print(int(float('$after') - float('$middle')))"), \"result\": $result}"
done
