#!/usr/bin/python3
"""Turns one section's raw outputs (what bench/run wrote under build-release/bench-raw/...)
into bench/results/<section>.json: machine, commit, load average, every sample, median/min/max,
and "rows": the ratios against the peer that bench/render.py puts in the README table.

usage: collect.py SECTION RAW_DIR OUT.json   (BENCH_COMMAND, BENCH_QUICK from the environment)
"""
import datetime
import json
import os
import platform
import subprocess
import sys

from sections_model import decode, load, offload
from sections_serving import api, batching, placement
from sections_stages import stages

SECTIONS = {"load": load, "decode": decode, "offload": offload, "batching": batching,
            "api": api, "placement": placement, "stages": stages}


def read_text(path, default=""):
    try:
        with open(path) as f:
            return f.read().strip()
    except FileNotFoundError:
        return default


def machine(raw):
    cpu = next((line.split(":", 1)[1].strip() for line in read_text("/proc/cpuinfo").splitlines()
                if line.startswith("model name")), "unknown")
    mem_kib = next((int(line.split()[1]) for line in read_text("/proc/meminfo").splitlines()
                    if line.startswith("MemTotal")), 0)
    return {"nproc": os.cpu_count(), "cpu_model": cpu, "mem_total_bytes": mem_kib * 1024,
            "kernel": " ".join(platform.uname()[i] for i in (0, 2, 4)),
            "loadavg_start": read_text(os.path.join(raw, "loadavg_start")),
            "loadavg_end": read_text(os.path.join(raw, "loadavg_end")),
            "environment": {k: os.environ.get(k, "") for k in
                            ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "OPENBLAS_NUM_THREADS",
                             "OPENBLAS_THREAD_TIMEOUT", "OPENBLAS_CORETYPE")},
            "note": "2 shared cores; other engineers compile on this machine: compare the ratios "
                    "of peers measured in the same run, not absolute numbers across runs"}


def git(*args):
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    section, raw, out = sys.argv[1:4]
    started = float(read_text(os.path.join(raw, "started"), "0"))
    ended = float(read_text(os.path.join(raw, "ended"), "0"))
    body = SECTIONS[section](raw)
    report = {
        "benchmark": section,
        "command": os.environ.get("BENCH_COMMAND", "bench/run"),
        "quick": os.environ.get("BENCH_QUICK") == "1",
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git("rev-parse", "HEAD"),
        # Results written earlier in the same run do not make the code dirty.
        "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no", "--", ".",
                              ":!bench/results")),
        "machine": machine(raw),
        "section_wall_seconds": round(ended - started, 1),
        **body,
    }
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    for row in report.get("rows", []):
        met = {True: "met", False: "MISSED", None: "-"}[row.get("goal_met")]
        print(f"  {row['metric']}: {row['summary']}  [{row.get('goal') or 'no goal'}: {met}]")
    print(f"  wrote {out}")


if __name__ == "__main__":
    main()
