#!/usr/bin/env bash
# The cost of a pipeline hop: decode tokens/s of the `small` Llama (8 layers, hidden 768, F32)
# served by one placerd against the same model over 2 placerd stages on loopback (Gloo over
# TCP, leader 4 layers + embeddings and head, worker 4 layers), alternated ROUNDS times through
# gRPC (placer-bench-grpc generate, batch 1, greedy), and the bytes the leader sends per
# generated token (placer_stage_sent_bytes_total; the answer back is as large again).
#   bench/stages.sh            (BUILD_DIR=build, ROUNDS=3, THREADS=2, NEW_TOKENS=64)
set -euo pipefail
BUILD_DIR=${BUILD_DIR:-build}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
NEW_TOKENS=${NEW_TOKENS:-64}
B=$(cd "$BUILD_DIR" && pwd)
MODEL=$B/bench-models/stages-small
[ -f "$MODEL/config.json" ] || "$B/placer-make-checkpoint" --out "$MODEL" --arch llama --preset small --seed 1 >/dev/null
WORK=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
NODE=(--model "$MODEL" --devices cuda:0=2GiB,cpu=4GiB --max-seq-len 512 --threads "$THREADS")
single=$(port); leader=$(port); worker=$(port); rendezvous=$(port); metrics=$(port)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
"$B/placerd" "${NODE[@]}" --listen 127.0.0.1:$single --metrics-listen "" >"$WORK/single.log" 2>&1 & pids+=($!)
GROUP=(--stages 2 --rendezvous 127.0.0.1:$rendezvous --stage-listen 127.0.0.1 --stage-timeout 10s)
"$B/placerd" "${NODE[@]}" "${GROUP[@]}" --stage-rank 0 --listen 127.0.0.1:$leader \
  --metrics-listen 127.0.0.1:$metrics >"$WORK/leader.log" 2>&1 & pids+=($!)
"$B/placerd" "${NODE[@]}" "${GROUP[@]}" --stage-rank 1 --listen 127.0.0.1:$worker \
  --metrics-listen "" >"$WORK/worker.log" 2>&1 & pids+=($!)
for target in $single $leader $worker; do
  for _ in $(seq 300); do "$B/placer" --target 127.0.0.1:$target health >/dev/null 2>&1 && break; sleep 0.2; done
done
sent() { curl -s 127.0.0.1:$metrics/metrics | awk '/^placer_stage_sent_bytes_total /{print $2}'; }
run() { "$B/placer-bench-grpc" generate --target 127.0.0.1:$1 --vocab 32000 --new-tokens "$NEW_TOKENS" --prompt-tokens 16; }
for round in $(seq "$ROUNDS"); do
  echo "{\"round\": $round, \"side\": \"1 process\", \"result\": $(run $single)}"
  before=$(sent)
  result=$(run $leader)
  after=$(sent)
  echo "{\"round\": $round, \"side\": \"2 stages\", \"sent_bytes\": $(python3 -c "print(float($after) - float($before))"), \"result\": $result}"
done
