"""Collectors of the serving sections of bench/run: batching (concurrent Generate streams),
api (Forward through gRPC vs in process) and placement (`placer plan` on a 10,000-layer
tree). Each takes the section's raw dir and returns "results" and README "rows"."""
import os
import statistics

from report_common import load_json, load_jsonl, load_ns, row, stats


def batching(raw):
    points, rows, samples = {}, [], {}
    for dtype in ("F32", "BF16"):
        name = f"streams_{dtype}.jsonl"
        if not os.path.exists(os.path.join(raw, name)):
            continue
        runs = load_jsonl(raw, name)
        samples[dtype] = runs
        points[dtype] = batching_points(runs, dtype, rows)
    first = next(iter(samples.values()))[0]
    return {"what": "aggregate generated tokens/s and time to first token of N concurrent gRPC "
                    "Generate streams on the small preset in F32 and BF16 (greedy, ignore_eos), "
                    "served by the continuous-batching scheduler (one engine thread, shared "
                    "forward passes); each stream count measured once per round, the median "
                    "round reported",
            "results": {"prompt_tokens": first["prompt_tokens"], "new_tokens": first["new_tokens"],
                        "points": points, "samples": samples},
            "rows": rows}


def batching_points(runs, dtype, rows):
    by_streams = {}
    for r in runs:
        by_streams.setdefault(r["streams"], []).append(r)
    # Per stream count, the median over rounds of the aggregate tokens/s (and that round's
    # time to first token and step times).
    median_run = {n: sorted(rs, key=lambda r: r["aggregate_tokens_per_second"])[(len(rs) - 1) // 2]
                  for n, rs in by_streams.items()}
    one = median_run[1]["aggregate_tokens_per_second"]
    points = []
    for n in sorted(median_run):
        r = median_run[n]
        speedup = r["aggregate_tokens_per_second"] / one
        points.append({"streams": n, "tokens_per_second": r["aggregate_tokens_per_second"],
                       "speedup": speedup, "ttft": r["ttft"], "step": r["step"],
                       "rounds_tokens_per_second": [x["aggregate_tokens_per_second"]
                                                    for x in by_streams[n]]})
        if n == 1:
            continue
        goal = "≥ 4.0" if n == 8 else None
        rows.append(row(f"{n} concurrent Generate streams, {dtype}: aggregate tokens/s",
                        f"{r['aggregate_tokens_per_second']:.1f} tok/s", f"1 stream {one:.1f} tok/s",
                        speedup, "N streams / 1 stream", goal, speedup >= 4.0 if goal else None,
                        f"median of {len(by_streams[n])} rounds; step median "
                        f"{r['step']['median'] * 1e3:.1f} ms (1 stream "
                        f"{median_run[1]['step']['median'] * 1e3:.1f} ms); time to first token "
                        f"median {r['ttft']['median']:.2f} s, max {r['ttft']['max']:.2f} s"))
    return points


def pooled_latency(rounds):
    samples = [x for r in rounds for x in r["latency_seconds"]]
    ordered = sorted(samples)
    return samples, {**stats(samples), "p99": ordered[max(-(-99 * len(ordered) // 100), 1) - 1]}


def api(raw):
    local_rounds = load_jsonl(raw, "in_process.jsonl")
    remote_rounds = load_jsonl(raw, "grpc.jsonl")
    local8 = load_jsonl(raw, "in_process_8.jsonl")
    remote8 = load_jsonl(raw, "grpc_8.jsonl")
    local_samples, local = pooled_latency(local_rounds)
    remote_samples, remote = pooled_latency(remote_rounds)
    tokens = local_rounds[0]["tokens"]
    rows = []
    for quantile in ("median", "p99"):
        a, b = local[quantile], remote[quantile]
        rows.append(row(f"Forward latency {'p50' if quantile == 'median' else 'p99'}, tiny, "
                        f"{tokens} tokens", f"gRPC {b * 1e6:.0f} µs",
                        f"in-process {a * 1e6:.0f} µs", b / a, "gRPC / in-process", None, None,
                        f"gRPC adds {(b - a) * 1e6:.0f} µs"))
    a = statistics.median(r["requests_per_second"] for r in local8)
    b = statistics.median(r["requests_per_second"] for r in remote8)
    rows.append(row("Forward requests/s at 8 concurrent clients, tiny", f"gRPC {b:.0f} req/s",
                    f"in-process, 8 threads {a:.0f} req/s", b / a, "gRPC / in-process", None,
                    None, "median of the rounds"))
    return {"what": "unary Forward on the tiny preset through gRPC (loopback, plaintext) vs the "
                    "same call in process, alternated in rounds; 1 compute thread both sides",
            "results": {"latency_in_process": {"samples": local_samples, **local},
                        "latency_grpc": {"samples": remote_samples, **remote},
                        "in_process_rounds": local_rounds, "grpc_rounds": remote_rounds,
                        "in_process_8_clients_rounds": local8, "grpc_8_clients_rounds": remote8},
            "rows": rows}


def placement(raw):
    plan_s = load_ns(raw, "plan_ns")
    help_s = load_ns(raw, "help_ns")
    plan = load_json(raw, "plan.json")
    med = statistics.median(plan_s)
    start = statistics.median(help_s)
    return {"what": "`placer plan --module-tree` of a 10,000-layer Llama-shaped tree (90,003 "
                    "tensors, ~16 GB in BF16) over 3 virtual GPUs of 4 GiB, 2 GiB of cpu and disk, whole process",
            "results": {"plan_seconds": {"samples": plan_s, **stats(plan_s)},
                        "process_start_seconds": {"samples": help_s, **stats(help_s)},
                        "plan_devices": [d.get("device", d.get("name")) for d in plan.get("devices", [])]
                        if isinstance(plan, dict) else None},
            "rows": [row("placer plan, 10,000-layer module tree", f"{med:.3f} s",
                         f"`placer --help` {start:.3f} s", med / start, "plan / process start",
                         None, None,
                         "no peer: Accelerate's infer_auto_device_map is not installable here "
                         "(no PyPI)")]}
