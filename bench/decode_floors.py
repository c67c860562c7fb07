"""The decode section's read floors (sections_model.py): a step's samples pooled over rounds,
the machine's read bandwidth from the section's bandwidth measurements, and a floor row from
per-step probes or that bandwidth."""
import os
import statistics

from report_common import MIB, load_json, row


def pooled(reports, key):
    """Every sample of `key` ("prefill_seconds" or "step_seconds") over the rounds' runs."""
    out = []
    for report in reports:
        for run in report["runs"]:
            value = run[key]
            out += value if isinstance(value, list) else [value]
    return out


def best_read_bandwidth(raw):
    """The fastest read pass (bytes/s) of every bandwidth measurement of the section, and each
    measurement's: the machine's read bandwidth, which a floor needs. The medians of one pass
    set moved from 39.8 to 63.6 GB/s between two runs on 2 shared vCPUs (bench/analysis.md);
    raw outputs older than best_bytes_per_second give their median."""
    samples = {}
    for name in sorted(os.listdir(raw)):
        if name.startswith("bandwidth") and name.endswith(".json"):
            read = load_json(raw, name)["read"]
            samples[name] = read.get("best_bytes_per_second", read["bytes_per_second"])
    return max(samples.values()), samples


def probed_floor(reports, read_bytes):
    """Each probed decode step against its own floor: read_bytes at the read bandwidth probed
    right after it (placer-bench-model decode --read-probe-mib: every other step, so a probed
    step never follows a probe's eviction of the L3). Returns (median over those steps of floor
    / step, median probed bandwidth, median floor, median of those steps), or None for runs
    without probes."""
    pairs = [(run["step_seconds"][probe["step"]], probe["bytes_per_second"])
             for report in reports for run in report["runs"] for probe in run.get("read_probes", [])]
    if not pairs:
        return None
    ratio = statistics.median(read_bytes / bps / step for step, bps in pairs)
    return (ratio, statistics.median(bps for _, bps in pairs),
            statistics.median(read_bytes / bps for _, bps in pairs),
            statistics.median(step for step, _ in pairs))


def floor_row(what, step, read_bytes, section_bps, reports, goal):
    """A read-floor row and its floor: per-step probes where the runs have them (the row's step
    is then the probed steps' median), else `step` against the section's fastest read
    (bandwidth*.json)."""
    probed = probed_floor(reports, read_bytes)
    if probed:
        ratio, bps, floor, step = probed
        how = f"{bps / 1e9:.2f} GB/s read, probed after every other step; ratio: median of those steps'"
    else:
        floor = read_bytes / section_bps
        ratio = floor / step
        how = f"{section_bps / 1e9:.2f} GB/s read"
    return row(what, f"{step * 1e3:.1f} ms/token",
               f"floor {floor * 1e3:.1f} ms ({read_bytes / MIB:.0f} MiB at {how})", ratio,
               "floor / placer", f"≥ {goal:.2f}", ratio >= goal), floor
