"""Helpers shared by the section collectors (sections_model.py, sections_serving.py)."""
import json
import os
import statistics

MIB = 1 << 20


def stats(samples):
    samples = list(samples)
    if not samples:
        return {"count": 0}
    return {"count": len(samples), "median": statistics.median(samples), "min": min(samples),
            "max": max(samples)}


def load_json(raw, name):
    with open(os.path.join(raw, name)) as f:
        return json.load(f)


def load_jsonl(raw, name):
    with open(os.path.join(raw, name)) as f:
        return [json.loads(line) for line in f if line.strip()]


def load_ns(raw, name):
    with open(os.path.join(raw, name)) as f:
        return [int(line) / 1e9 for line in f if line.strip()]


def row(metric, placer, peer, ratio, ratio_means, goal=None, goal_met=None, note=""):
    """A README table row. `ratio_means` says how the ratio is formed, e.g. "placer / cat"."""
    summary = f"{placer} vs {peer}: {ratio:.2f} ({ratio_means})" if ratio is not None else placer
    return {"metric": metric, "placer": placer, "peer": peer, "ratio": ratio,
            "ratio_means": ratio_means, "goal": goal, "goal_met": goal_met, "note": note,
            "summary": summary}
