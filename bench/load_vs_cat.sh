#!/usr/bin/env bash
# Loader benchmark (issue 3): load every tensor of a ~1 GiB F32 checkpoint into
# CPU tensors vs `cat` of the same files to /dev/null, page cache warm, same
# run. Reports the ratio of medians and the peak RSS against the bytes loaded.
# Goal (reported, not asserted): ratio <= 1.2, peak RSS <= bytes + 10%.
#
#   bench/load_vs_cat.sh [--quick]     # --quick: ~200 MiB checkpoint, 3 runs
#
# Environment: BUILD_DIR (default build), RUNS (default 5, --quick 3),
# OUT (default bench/results/load_vs_cat.json, --quick load_vs_cat_quick.json).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

QUICK=0
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "load_vs_cat.sh: unknown argument '$arg' (only --quick)" >&2; exit 2 ;;
  esac
done

BUILD_DIR="${BUILD_DIR:-build}"
PY=/usr/bin/python3
if [[ $QUICK == 1 ]]; then
  RUNS="${RUNS:-3}"
  NAME=llama-f32-200mib
  # ~52.9M parameters, ~202 MiB as F32.
  DIMS=(--layers 4 --hidden 768 --heads 12 --kv-heads 12 --intermediate 2048 --vocab 16000)
  OUT="${OUT:-bench/results/load_vs_cat_quick.json}"
else
  RUNS="${RUNS:-5}"
  NAME=llama-f32-1gib
  # ~268.2M parameters, ~1023 MiB as F32.
  DIMS=(--layers 6 --hidden 1536 --heads 12 --kv-heads 12 --intermediate 4096 --vocab 32000)
  OUT="${OUT:-bench/results/load_vs_cat.json}"
fi
MODEL_DIR="$BUILD_DIR/bench-models/$NAME"

# 1. Build (configure first if the build dir was never configured).
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$BUILD_DIR" -j2 --target placer-bench-load placer-make-checkpoint
BENCH="$BUILD_DIR/placer-bench-load"

# 2. The checkpoint, written once (a stamp marks a complete write).
if [[ ! -f "$MODEL_DIR/.complete" ]]; then
  rm -rf "$MODEL_DIR"
  mkdir -p "$(dirname "$MODEL_DIR")"
  echo "writing $MODEL_DIR ..."
  "$BUILD_DIR/placer-make-checkpoint" --out "$MODEL_DIR" --arch llama "${DIMS[@]}" \
    --dtype F32 --max-shard-size 500MB --seed 0 >/dev/null
  touch "$MODEL_DIR/.complete"
fi
mapfile -t FILES < <(find "$MODEL_DIR" -maxdepth 1 -type f ! -name '.*' | sort)
FILE_BYTES=$(cat "${FILES[@]}" | wc -c)

now_ns() { date +%s%N; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# 3. Warm the page cache (and the libraries the loader maps).
cat "${FILES[@]}" >/dev/null
"$BENCH" "$MODEL_DIR" >/dev/null
LOADAVG_START="$(cut -d' ' -f1-3 /proc/loadavg)"

# 4. Alternate: cat, clone load, clone into huge pages, zero-copy view load.
: >"$TMP/cat"; : >"$TMP/clone"; : >"$TMP/clone-thp"; : >"$TMP/view"
for ((i = 1; i <= RUNS; i++)); do
  t0=$(now_ns); cat "${FILES[@]}" >/dev/null; t1=$(now_ns)
  echo "$(( t1 - t0 ))" >>"$TMP/cat"
  for mode in clone clone-thp view; do
    t0=$(now_ns); json="$("$BENCH" "$MODEL_DIR" --mode "$mode")"; t1=$(now_ns)
    echo "$(( t1 - t0 )) $json" >>"$TMP/$mode"
  done
  echo "run $i/$RUNS done"
done
LOADAVG_END="$(cut -d' ' -f1-3 /proc/loadavg)"

# 5. The results JSON and the summary.
mkdir -p "$(dirname "$OUT")"
COMMAND="bench/load_vs_cat.sh${1:+ $*}"
if [[ $BUILD_DIR != build ]]; then COMMAND="BUILD_DIR=$BUILD_DIR $COMMAND"; fi
CPU_MODEL="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
MEM_TOTAL="$(grep -m1 '^MemTotal' /proc/meminfo | awk '{printf "%.0f", $2 * 1024}')"
COMMIT="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
DIRTY="$(git status --porcelain 2>/dev/null | grep -q . && echo true || echo false)"
CAT_VERSION="$(cat --version | head -1)"

TMP="$TMP" OUT="$OUT" COMMAND="$COMMAND" MODEL_DIR="$MODEL_DIR" FILE_BYTES="$FILE_BYTES" \
NFILES="${#FILES[@]}" RUNS="$RUNS" QUICK="$QUICK" CPU_MODEL="$CPU_MODEL" MEM_TOTAL="$MEM_TOTAL" \
NPROC="$(nproc)" KERNEL="$(uname -srm)" COMMIT="$COMMIT" DIRTY="$DIRTY" \
LOADAVG_START="$LOADAVG_START" LOADAVG_END="$LOADAVG_END" CAT_VERSION="$CAT_VERSION" \
DIMS="${DIMS[*]}" "$PY" - <<'EOF'
import json, os, statistics, datetime

env = os.environ
tmp = env["TMP"]

def stats(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}

cat_s = [int(l) / 1e9 for l in open(f"{tmp}/cat") if l.strip()]
modes = {}
for mode in ("clone", "clone-thp", "view"):
    rows = []
    for line in open(f"{tmp}/{mode}"):
        if not line.strip():
            continue
        ns, js = line.split(" ", 1)
        r = json.loads(js)
        r["process_seconds"] = int(ns) / 1e9
        rows.append(r)
    modes[mode] = rows

cat_med = statistics.median(cat_s)
report = {
    "benchmark": "load_vs_cat",
    "goal": "ratio <= 1.2 and peak RSS <= bytes loaded + 10% (reported, not asserted)",
    "command": env["COMMAND"],
    "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "git_commit": env["COMMIT"],
    "git_dirty": env["DIRTY"] == "true",
    "machine": {
        "nproc": int(env["NPROC"]),
        "cpu_model": env["CPU_MODEL"],
        "mem_total_bytes": int(env["MEM_TOTAL"]),
        "kernel": env["KERNEL"],
        "loadavg_start": env["LOADAVG_START"],
        "loadavg_end": env["LOADAVG_END"],
        "cat": env["CAT_VERSION"],
    },
    "checkpoint": {
        "dir": env["MODEL_DIR"],
        "arch": "llama",
        "dtype": "F32",
        "dims": env["DIMS"],
        "files": int(env["NFILES"]),
        "file_bytes": int(env["FILE_BYTES"]),
        "tensor_bytes": modes["clone"][0]["bytes"],
        "tensors": modes["clone"][0]["tensors"],
        "shards": modes["clone"][0]["shards"],
    },
    "runs": int(env["RUNS"]),
    "page_cache": "warm (one cat and one load before the timed runs)",
    "cat": {"seconds": cat_s, **{k: v for k, v in stats(cat_s).items()}},
}
for mode, rows in modes.items():
    load = [r["load_seconds"] for r in rows]
    proc = [r["process_seconds"] for r in rows]
    peak = max(r["peak_rss_bytes"] for r in rows)
    base = statistics.median(r["rss_before_bytes"] for r in rows)
    nbytes = rows[0]["bytes"]
    report[mode] = {
        "what": {
            "clone": "Checkpoint::Open + ReadTensor(name).clone() for every tensor, all kept alive",
            "clone-thp": "as clone, into 2 MiB-aligned buffers with madvise(MADV_HUGEPAGE) (experiment)",
            "view": "Checkpoint::Open + zero-copy ReadTensor(name), one byte of every page read, all kept alive",
        }[mode],
        "samples": rows,
        "load_seconds": stats(load),
        "process_seconds": stats(proc),
        "ratio_load_vs_cat": statistics.median(load) / cat_med,
        "ratio_process_vs_cat": statistics.median(proc) / cat_med,
        "peak_rss_bytes": peak,
        "rss_before_load_bytes": base,
        "bytes_loaded": nbytes,
        "peak_rss_over_bytes": peak / nbytes,
        "peak_rss_minus_baseline_over_bytes": (peak - base) / nbytes,
        "rss_anon_after_bytes": statistics.median(r["rss_anon_after_bytes"] for r in rows),
        "rss_file_after_bytes": statistics.median(r["rss_file_after_bytes"] for r in rows),
    }

with open(env["OUT"], "w") as f:
    json.dump(report, f, indent=2)
    f.write("\n")

mib = 1 << 20
print()
print(f"checkpoint {env['MODEL_DIR']}: {report['checkpoint']['tensor_bytes'] / mib:.0f} MiB of tensors "
      f"in {report['checkpoint']['shards']} shards, {report['runs']} runs, warm page cache, "
      f"loadavg {env['LOADAVG_START']} -> {env['LOADAVG_END']}")
print(f"{'':30} {'median s':>9} {'min s':>7} {'max s':>7} {'ratio':>6} {'peak RSS MiB':>13} {'RSS/bytes':>9}")
s = report["cat"]
print(f"{'cat > /dev/null':30} {s['median']:9.3f} {s['min']:7.3f} {s['max']:7.3f} {1.0:6.2f} {'-':>13} {'-':>9}")
for mode in ("clone", "clone-thp", "view"):
    r = report[mode]
    for key, label in (("load_seconds", f"load {mode} (in-process)"),
                       ("process_seconds", f"load {mode} (whole proc)")):
        t = r[key]
        ratio = t["median"] / cat_med
        print(f"{label:30} {t['median']:9.3f} {t['min']:7.3f} {t['max']:7.3f} {ratio:6.2f} "
              f"{r['peak_rss_bytes'] / mib:13.0f} {r['peak_rss_over_bytes']:9.2f}")
c = report["clone"]
print(f"goal: ratio <= 1.2 -> clone {c['ratio_load_vs_cat']:.2f} (in-process); "
      f"peak RSS <= 1.10 x bytes -> clone {c['peak_rss_over_bytes']:.2f} x "
      f"({c['peak_rss_minus_baseline_over_bytes']:.2f} x above the {c['rss_before_load_bytes'] / mib:.0f} MiB "
      f"baseline before loading)")
print(f"wrote {env['OUT']}")
EOF
