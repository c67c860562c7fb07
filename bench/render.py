#!/usr/bin/python3
"""Renders RESULTS_DIR/README.md (the table of ratios against the peers, goals, whether met)
from the section JSON files bench/run wrote there, plots tokens/s vs concurrent streams and
per-token time vs fraction offloaded (PNG, gnuplot), and, for a full run, replaces the table
between the bench markers of the top-level README.md.

usage: render.py RESULTS_DIR [--command "bench/run"] [--top-readme README.md]
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import tempfile

ORDER = ["load", "decode", "offload", "batching", "api", "placement", "stages"]
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
MET = {True: "met", False: "**missed**", None: "—"}


def sections(results_dir):
    found = {}
    for path in glob.glob(os.path.join(results_dir, "*.json")):
        with open(path) as f:
            data = json.load(f)
        if isinstance(data, dict) and "rows" in data and data.get("benchmark") in ORDER:
            found[data["benchmark"]] = data
    return [found[name] for name in ORDER if name in found]


def table(found):
    lines = ["| section | measure | placer | peer / floor | ratio | goal | met |",
             "|---|---|---|---|---|---|---|"]
    for data in found:
        for r in data["rows"]:
            ratio = "—" if r["ratio"] is None else f"{r['ratio']:.2f} ({r['ratio_means']})"
            lines.append(f"| {data['benchmark']} | {r['metric']} | {r['placer']} | {r['peer']} | "
                         f"{ratio} | {r['goal'] or '—'} | {MET[r['goal_met']]} |")
    return "\n".join(lines)


def by_how_much(r):
    goal = r["goal"]
    bound = float(goal.split()[-1])
    if goal.startswith("≤"):
        return f"{r['ratio']:.2f} against ≤ {bound}: {r['ratio'] / bound:.1f}× over the goal"
    return f"{r['ratio']:.2f} against ≥ {bound}: {bound / r['ratio']:.1f}× short of the goal"


def misses(found):
    lines = []
    for data in found:
        for r in data["rows"]:
            if r["goal_met"] is False:
                note = f" ({r['note']})" if r["note"] else ""
                lines.append(f"- {data['benchmark']}: {r['metric']}: {by_how_much(r)}{note}")
    return "\n".join(lines) or "- none"


def machine_lines(found):
    """The machine, environment and commit each section ran on: one line where every section
    shares them, else one per machine naming its sections (`--only` keeps the others' JSON)."""
    if not found:
        return ""

    def machine(d):
        m = d["machine"]
        environment = ", ".join(f"{k}={v}" for k, v in m.get("environment", {}).items() if v)
        return (f"{m['nproc']} × {m['cpu_model']}, {m['mem_total_bytes'] / 2**30:.1f} GiB, "
                f"{m['kernel']}. Environment: {environment}. Commit `{d['git_commit'][:12]}`"
                f"{' (with uncommitted changes)' if d['git_dirty'] else ''}")

    groups = {}
    for d in found:
        groups.setdefault(machine(d), []).append(d)
    if len(groups) == 1:
        head = f"Machine: {next(iter(groups))}, {found[0]['date_utc']}."
    else:
        head = "\n\n".join(
            f"Machine for {', '.join(d['benchmark'] for d in ds)}: {description}, {ds[0]['date_utc']}."
            for description, ds in groups.items())
    loads = ", ".join(f"{d['benchmark']} {d['machine']['loadavg_start'].split()[0]}→"
                      f"{d['machine']['loadavg_end'].split()[0]} ({d['section_wall_seconds']:.0f} s)"
                      for d in found)
    return f"{head}\nLoad average (1 min) before→after each section, and its wall time: {loads}."


def gnuplot(script, workdir):
    if shutil.which("gnuplot") is None:
        return False
    subprocess.run(["gnuplot"], input=script, text=True, check=True, cwd=workdir)
    return True


def plots(found, results_dir):
    made = []
    named = {d["benchmark"]: d for d in found}
    with tempfile.TemporaryDirectory() as work:
        if "batching" in named:
            by_dtype = named["batching"]["results"]["points"]
            if isinstance(by_dtype, list):  # results written before BF16 joined the sweep
                by_dtype = {"F32": by_dtype}
            for dtype, pts in by_dtype.items():
                with open(os.path.join(work, f"streams_{dtype}.dat"), "w") as f:
                    for p in pts:
                        f.write(f"{p['streams']} {p['tokens_per_second']} {p['ttft']['median']} "
                                f"{pts[0]['tokens_per_second'] * p['streams']}\n")
            lines = []
            for dtype in by_dtype:
                lines += [f"'streams_{dtype}.dat' u 1:2 w lp lw 2 t 'placer {dtype} tokens/s'",
                          f"'streams_{dtype}.dat' u 1:4 w l dt 2 t '{dtype}: linear from 1 stream'",
                          f"'streams_{dtype}.dat' u 1:3 axes x1y2 w lp t '{dtype} time to first "
                          "token (right axis)'"]
            out = os.path.abspath(os.path.join(results_dir, "batching.png"))
            if gnuplot(f"""set terminal png size 720,420
set output '{out}'
set title 'Generate, small preset, 2 threads: aggregate tokens/s vs concurrent streams'
set xlabel 'concurrent gRPC streams'; set ylabel 'generated tokens/s (all streams)'
set y2label 'median time to first token (s)'; set y2tics; set ytics nomirror
set logscale x 2; set key top left; set grid
plot """ + ", \\\n     ".join(lines) + "\n", work):
                made.append("batching.png")
        if "offload" in named:
            res = named["offload"]["results"]
            series = {}
            for p in res["points"]:
                device = "gpu" if p["layout"] == "gpu" else p["layout"].split("-")[1]
                key = f"{device}, prefetch {'on' if p['prefetch'] else 'off'}"
                series.setdefault(key, []).append(p)
            resident = [p for p in res["points"] if p["layout"] == "gpu"]
            plot_lines = []
            for i, (key, pts) in enumerate(sorted(series.items())):
                if key.startswith("gpu"):
                    continue
                name = f"s{i}.dat"
                with open(os.path.join(work, name), "w") as f:
                    for p in sorted(resident + pts, key=lambda q: q["fraction_offloaded"]):
                        f.write(f"{p['fraction_offloaded']} {p['seconds_per_token'] * 1e3}\n")
                plot_lines.append(f"'{name}' u 1:2 w lp lw 2 t '{key}'")
            weight_bytes = res["samples"][0]["weight_bytes"]
            bps = max(res["bandwidth"][way]["bytes_per_second"]
                      for way in ("copy", "staging_copy") if way in res["bandwidth"])
            compute_ms = res["compute_seconds_per_token"] * 1e3
            transfer = f"(x * {weight_bytes} / {bps} * 1e3)"
            out = os.path.abspath(os.path.join(results_dir, "offload.png"))
            if plot_lines and gnuplot(f"""set terminal png size 720,420
set output '{out}'
set title 'Decode, small preset, one virtual GPU: time per token vs fraction offloaded'
set xlabel 'fraction of weight bytes staged per token'; set ylabel 'ms per token'
set key top left; set grid; set xrange [0:1.05]; set yrange [0:*]
plot {", ".join(plot_lines)}, \\
     ({compute_ms} > {transfer} ? {compute_ms} : {transfer}) w l dt 2 lw 2 t 'max(transfer floor, compute)', \\
     {compute_ms} + {transfer} w l dt 3 t 'transfer + compute (no overlap)'
""", work):
                made.append("offload.png")
    return made


def render(results_dir, command):
    found = sections(results_dir)
    made = plots(found, results_dir)
    quick = any(d["quick"] for d in found)
    images = "\n".join(f"![{name[:-4]}]({name})" for name in made)
    analysis_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "analysis.md")
    analysis = open(analysis_path).read().strip() if os.path.exists(analysis_path) else ""
    text = f"""# Benchmark results{' (--quick)' if quick else ''}

Written by `bench/render.py`; do not edit by hand. Command: `{command}`.
Each section's JSON here (`<section>.json`) holds the machine, commit, load average, every
sample and median/min/max. Ratios compare placer with a peer measured in the same run.

{machine_lines(found)}

{table(found)}

Goals missed (by how much; the causes are in the analysis below):
{misses(found)}

{images}

{analysis}
"""
    with open(os.path.join(results_dir, "README.md"), "w") as f:
        f.write(text)
    return found, quick


def update_top_readme(path, found, command):
    with open(path) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        return False
    commits = {}
    for d in found:
        commits.setdefault(d["git_commit"][:12], []).append(d["benchmark"])
    if len(commits) == 1:
        source = f"commit `{found[0]['git_commit'][:12]}`"
    else:  # a later `--only` run replaced some sections
        source = "sections from " + "; ".join(
            f"commit `{c}`: {', '.join(names)}" for c, names in commits.items())
    block = (f"{BEGIN}\nLatest run (`{command}`, {source}, "
             f"{found[-1]['date_utc'][:10]}; details, plots and causes in "
             f"[`bench/results/README.md`](bench/results/README.md)):\n\n{table(found)}\n{END}")
    head, rest = text.split(BEGIN, 1)
    with open(path, "w") as f:
        f.write(head + block + rest.split(END, 1)[1])
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results_dir")
    parser.add_argument("--command", default="bench/run")
    parser.add_argument("--top-readme", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "README.md"))
    args = parser.parse_args()
    found, quick = render(args.results_dir, args.command)
    print(table(found))
    if found and not quick and len(found) == len(ORDER):
        update_top_readme(args.top_readme, found, args.command)


if __name__ == "__main__":
    main()
