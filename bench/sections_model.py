"""Collectors of the model sections of bench/run: load (placerd and the loader vs cat),
decode (placer vs PyTorch eager and the memory-bandwidth floor) and offload (per-token time vs
the transfer floor and compute). Each takes the section's raw dir and returns its "results"
(every sample) and "rows" (README table: ratio against the peer, goal, met)."""
import os
import statistics

from decode_floors import best_read_bandwidth, floor_row, pooled
from report_common import MIB, load_json, load_jsonl, load_ns, row, stats


def load(raw):
    cat = load_ns(raw, "cat_ns")
    lvc = load_json(raw, "load_vs_cat.json")
    base = load_jsonl(raw, "no_model.jsonl")[0]
    nbytes = lvc["checkpoint"]["tensor_bytes"]
    cat_med = statistics.median(cat)
    results = {"checkpoint": {**lvc["checkpoint"], "dir": open(os.path.join(raw, "checkpoint")).read().strip()},
               "cat_seconds": {"samples": cat, **stats(cat)},
               "placerd_no_model": base}
    rows = []
    for layout in ("cpu", "disk"):
        runs = load_jsonl(raw, f"placerd_{layout}.jsonl")
        ready = [r["ready_seconds"] for r in runs]
        logged = [r["logged_load_seconds"] for r in runs]
        first = [r["first_forward_seconds"] for r in runs]
        peak_ready = max(r["peak_rss_bytes_at_ready"] for r in runs)
        peak_forward = max(r["peak_rss_bytes_after_forward"] for r in runs)
        results[f"placerd_all_{layout}"] = {
            "samples": runs, "ready_seconds": stats(ready), "logged_load_seconds": stats(logged),
            "first_forward_seconds": stats(first), "peak_rss_bytes_at_ready": peak_ready,
            "peak_rss_bytes_after_forward": peak_forward}
        ready_med, logged_med = statistics.median(ready), statistics.median(logged)
        above = (peak_ready - base["peak_rss_bytes_at_ready"]) / nbytes
        if layout == "cpu":
            rows.append(row("load, all on cpu: placerd start to SERVING",
                            f"{ready_med:.3f} s", f"cat {cat_med:.3f} s", ready_med / cat_med,
                            "placerd / cat", "≤ 1.2", ready_med / cat_med <= 1.2,
                            f"includes process start; no-model placerd is up in "
                            f"{base['ready_seconds']:.2f} s"))
            rows.append(row("load, all on cpu: placerd's logged load time",
                            f"{logged_med:.3f} s", f"cat {cat_med:.3f} s", logged_med / cat_med,
                            "placerd / cat", "≤ 1.2", logged_med / cat_med <= 1.2,
                            "Checkpoint::Open to ready, inside the process"))
            for label, peak in (("at ready", peak_ready), ("after the first Forward", peak_forward)):
                rows.append(row(f"load, all on cpu: peak RSS {label}",
                                f"{peak / MIB:.0f} MiB", f"{nbytes / MIB:.0f} MiB on cpu",
                                peak / nbytes, "RSS / bytes", "≤ 1.1", peak / nbytes <= 1.1,
                                f"{(peak - base['peak_rss_bytes_at_ready']) / nbytes:.2f} × above "
                                f"the {base['peak_rss_bytes_at_ready'] / MIB:.0f} MiB of a placerd "
                                f"with no model"))
        else:
            rows.append(row("load, all on disk: placerd start to SERVING",
                            f"{ready_med:.3f} s", f"cat {cat_med:.3f} s", ready_med / cat_med,
                            "placerd / cat", "near zero (no bytes read)", None,
                            f"logged load {logged_med:.3f} s; first Forward "
                            f"{statistics.median(first):.2f} s"))
            rows.append(row("load, all on disk: RSS at ready above a no-model placerd",
                            f"{(peak_ready - base['peak_rss_bytes_at_ready']) / MIB:.0f} MiB",
                            f"{nbytes / MIB:.0f} MiB of weights", above, "extra RSS / bytes",
                            "near zero", None))
    bf16 = load_bf16(raw)
    if bf16 is not None:
        results["placerd_bf16_auto"] = bf16["results"]
        rows.extend(bf16["rows"])
    clone = lvc["clone"]
    results["load_vs_cat"] = {k: lvc[k] for k in ("cat", "clone", "clone-thp", "view") if k in lvc}
    rows.append(row("loader alone: Checkpoint + clone of every tensor (load_vs_cat.sh)",
                    f"{clone['load_seconds']['median']:.3f} s", f"cat {lvc['cat']['median']:.3f} s",
                    clone["ratio_load_vs_cat"], "loader / cat", "≤ 1.2",
                    clone["ratio_load_vs_cat"] <= 1.2,
                    f"peak RSS {clone['peak_rss_over_bytes']:.2f} × bytes (goal ≤ 1.1)"))
    return {"what": "time to ready and peak RSS of placerd for a checkpoint all on cpu and all "
                    "on disk, vs cat of its files to /dev/null; page cache warm",
            "results": results, "rows": rows}


def load_bf16(raw):
    """A BF16 checkpoint served with the default --dtype auto: SERVING against a no-model
    placerd start plus a cat of its shards (measured in the same round), RSS above a no-model
    placerd at ready (mapped, not yet touched)."""
    if not os.path.exists(os.path.join(raw, "placerd_bf16.jsonl")):
        return None
    directory = open(os.path.join(raw, "bf16_checkpoint")).read().strip()
    nbytes = sum(os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory)
                 if name.endswith(".safetensors"))
    cat = load_ns(raw, "bf16_cat_ns")
    bare = load_jsonl(raw, "bf16_no_model.jsonl")
    runs = load_jsonl(raw, "placerd_bf16.jsonl")
    peer = [b["ready_seconds"] + c for b, c in zip(bare, cat)]
    ready = [r["ready_seconds"] for r in runs]
    extra = [r["peak_rss_bytes_at_ready"] - b["peak_rss_bytes_at_ready"] for r, b in zip(runs, bare)]
    ready_med, peer_med, extra_max = statistics.median(ready), statistics.median(peer), max(extra)
    name = os.path.basename(directory)
    dtypes = sorted({r.get("compute_dtype", "") for r in runs} - {""})
    results = {"dir": directory, "tensor_file_bytes": nbytes, "samples": runs,
               "no_model_samples": bare, "cat_seconds": {"samples": cat, **stats(cat)},
               "ready_seconds": stats(ready), "peer_seconds": stats(peer),
               "extra_rss_bytes_at_ready": extra}
    rows = [row(f"load, BF16 checkpoint ({name}, --dtype auto): placerd start to SERVING",
                f"{ready_med:.3f} s", f"no-model start + cat {peer_med:.3f} s", ready_med / peer_med,
                "placerd / (no-model start + cat)", "≤ 1.2", ready_med / peer_med <= 1.2,
                f"cat alone {statistics.median(cat):.3f} s" +
                (f"; compute dtype {', '.join(dtypes)}" if dtypes else "")),
            row(f"load, BF16 checkpoint ({name}, --dtype auto): RSS at ready above a no-model placerd",
                f"{extra_max / MIB:.0f} MiB", f"{nbytes / MIB:.0f} MiB of weights", extra_max / nbytes,
                "extra RSS / bytes", "≤ 0.1", extra_max / nbytes <= 0.1,
                "the weights are mapped, not copied")]
    return {"results": results, "rows": rows}


def decode(raw):
    bandwidth = load_json(raw, "bandwidth.json")
    ours = load_jsonl(raw, "placer_in_process.jsonl")
    peer = load_jsonl(raw, "pytorch_eager.jsonl")
    grpc_rounds = load_jsonl(raw, "placer_grpc.jsonl")
    # The floor row's own in-process run, a read probed after each step (absent from older raw
    # outputs: the floor then takes the section's fastest read).
    probed = (load_jsonl(raw, "placer_in_process_probed.jsonl")
              if os.path.exists(os.path.join(raw, "placer_in_process_probed.jsonl")) else [])
    # A decode step reads each weight once: the floor is those bytes at the compute threads'
    # read bandwidth. A copy's bandwidth counts every byte twice (read and write), so dividing
    # by it gave a "floor" placer could beat.
    read_bps, read_samples = best_read_bandwidth(raw)
    read_bytes = ours[0]["decode_read_bytes_per_token"]
    floor = read_bytes / read_bps
    steps = {"placer in-process": pooled(ours, "step_seconds"),
             "placer gRPC": [s for r in grpc_rounds for s in r["step_seconds"][0]],
             "PyTorch eager": pooled(peer, "step_seconds")}
    prefills = {"placer in-process": pooled(ours, "prefill_seconds"),
                "placer gRPC (time to first token)": [r["ttft_seconds"][0] for r in grpc_rounds],
                "PyTorch eager": pooled(peer, "prefill_seconds")}
    step = {k: statistics.median(v) for k, v in steps.items()}
    prefill = {k: statistics.median(v) for k, v in prefills.items()}
    prompt = ours[0]["prompt_tokens"]
    tokens = {"placer in-process": ours[0]["runs"][0]["tokens"],
              "PyTorch eager": peer[0]["runs"][0]["tokens"],
              "placer gRPC": grpc_rounds[0]["tokens"][0]}
    same = len({tuple(t) for t in tokens.values()}) == 1
    results = {"model": ours[0]["dir"], "threads": ours[0]["threads"],
               "blas": {"placer": ours[0]["blas"], "pytorch": peer[0]["blas"],
                        "pytorch_config": peer[0].get("torch_blas_config")},
               "torch_version": peer[0].get("torch_version"), "prompt_tokens": prompt,
               "new_tokens": ours[0]["new_tokens"], "rounds": len(ours), "bandwidth": bandwidth,
               "read_bytes_per_second": read_bps, "read_bytes_per_second_samples": read_samples,
               "decode_read_bytes_per_token": read_bytes, "bandwidth_floor_seconds_per_token": floor,
               "step_seconds": {k: {"samples": v, **stats(v)} for k, v in steps.items()},
               "prefill_seconds": {k: {"samples": v, **stats(v)} for k, v in prefills.items()},
               "placer_in_process": ours, "placer_grpc": grpc_rounds, "pytorch_eager": peer,
               "placer_in_process_probed": probed,
               "greedy_tokens_identical": same, "greedy_tokens_round1": tokens}
    tps = {k: 1 / v for k, v in step.items()}
    rows = []
    for side in ("placer in-process", "placer gRPC"):
        ratio = tps[side] / tps["PyTorch eager"]
        rows.append(row(f"decode tokens/s, small, batch 1: {side}", f"{tps[side]:.2f} tok/s",
                        f"PyTorch eager {tps['PyTorch eager']:.2f} tok/s", ratio, "placer / peer",
                        "≥ 1.0", ratio >= 1.0))
    for side in ("placer in-process", "placer gRPC (time to first token)"):
        ratio = prefill["PyTorch eager"] / prefill[side]
        rows.append(row(f"prompt tokens/s ({prompt}-token prompt): {side}",
                        f"{prompt / prefill[side]:.1f} tok/s",
                        f"PyTorch eager {prompt / prefill['PyTorch eager']:.1f} tok/s", ratio,
                        "placer / peer", None, None,
                        "placer computes the lm_head for every prompt position, the peer for "
                        "the last only" if side == "placer in-process" else ""))
    floor_of_placer, floor = floor_row(
        "decode vs the memory-bandwidth floor (in-process)", step["placer in-process"], read_bytes,
        read_bps, probed, 0.70)
    floor_of_placer["note"] = (f"PyTorch eager reaches {floor / step['PyTorch eager']:.2f} of "
                                "the floor")
    rows.append(floor_of_placer)
    overhead = step["placer gRPC"] / step["placer in-process"]
    rows.append(row("gRPC cost per decode token (small)", f"{step['placer gRPC'] * 1e3:.2f} ms",
                    f"in-process {step['placer in-process'] * 1e3:.2f} ms", overhead,
                    "gRPC / in-process", "≤ 1.05", overhead <= 1.05))
    rows += llama_cpp_rows(raw, prompt, results)
    rows += drift_rows(raw, results)
    return {"what": "batch-1 greedy prefill and decode of the small Llama preset, F32 (and BF16 "
                    "against llama.cpp), same threads every side; greedy tokens identical across "
                    "placer and PyTorch: " + str(same),
            "results": results, "rows": rows}


# (model, label) pairs bench/run measures against llama.cpp, in the order of the table: the
# label is the dtype placer serves (the checkpoint's), or int8 / int8a8 / int4 / int4a8 for placerd
# --quantize on the unquantized checkpoint (QUANT_FLAGS) against llama.cpp's Q8_0 / Q4_0 of the
# same weights.
LLAMA_CPP_CONFIGS = (("small", "F32"), ("small", "BF16"), ("tinyllama", "BF16"),
                     ("small", "int8"), ("small", "int8a8"), ("small", "int4"), ("small", "int4a8"),
                     ("tinyllama", "int8"), ("tinyllama", "int8a8"), ("tinyllama", "int4"),
                     ("tinyllama", "int4a8"))
LLAMA_CPP_MODEL_WORDS = {"small": "small", "tinyllama": "~1.1B (TinyLlama shape)"}
LLAMA_CPP_QUANT_PEERS = {"int8": "Q8_0", "int8a8": "Q8_0", "int4": "Q4_0", "int4a8": "Q4_0"}
# placerd's flags per quantized label, as bench/run passes them.
QUANT_FLAGS = {"int8": "--quantize int8 --quantize-lm-head int8",
               "int8a8": "--quantize int8 --quantize-lm-head int8 --quantize-activations int8",
               "int4": "--quantize int4 --quantize-lm-head int8",
               "int4a8": "--quantize int4 --quantize-lm-head int8 --quantize-activations int8"}
# Issue 20's goals for the quantized rows; the unquantized ones want ≥ 1.0 both ways (issue 9).
QUANT_PREFILL_GOAL = 0.8
QUANT_FLOOR_GOAL = 0.75  # the moonshot: of the packed bytes' read-bandwidth floor


def llama_cpp_rows(raw, prompt, results):
    """placer through gRPC against llama-bench on the same weights (GGUF), per model and label:
    decode and prefill tokens/s, medians over the alternating rounds."""
    rows = []
    for model, label in LLAMA_CPP_CONFIGS:
        name_part = f"{model}_{label}"
        peer_runs = []
        for name in sorted(os.listdir(raw)):
            if name.startswith(f"llama_cpp_{name_part}_") and name.endswith(".json"):
                peer_runs.append(load_json(raw, name))
        ours = load_jsonl(raw, f"placer_grpc_{name_part}.jsonl") if os.path.exists(
            os.path.join(raw, f"placer_grpc_{name_part}.jsonl")) else []
        if not peer_runs or not ours:
            continue
        prompt_file = os.path.join(raw, f"placer_grpc_prompt_{name_part}.jsonl")
        our_prompts = load_jsonl(raw, os.path.basename(prompt_file)) if os.path.exists(prompt_file) else []
        peer_decode = statistics.median(t["avg_ts"] for r in peer_runs for t in r if t["n_gen"] > 0)
        # Each timed repetition of a prompt (samples_ns; older raw outputs: the average).
        peer_prefill = statistics.median(
            s for r in peer_runs for t in r if t["n_prompt"] > 0 and t["n_gen"] == 0
            for s in ([t["n_prompt"] * 1e9 / ns for ns in t["samples_ns"]] if "samples_ns" in t
                      else [t["avg_ts"]]))
        our_decode = 1 / statistics.median(s for r in ours for s in r["step_seconds"][0])
        our_prefill = prompt / statistics.median(r["ttft_seconds"][0] for r in ours + our_prompts)
        peer_type = LLAMA_CPP_QUANT_PEERS.get(label)
        results[f"llama_cpp_{name_part}"] = {"runs": peer_runs, "placer_grpc": ours,
                                             "placer_grpc_prompts": our_prompts,
                                             "llama_cpp_type": peer_type or label,
                                             "decode_tokens_per_second": peer_decode,
                                             "prefill_tokens_per_second": peer_prefill}
        words = LLAMA_CPP_MODEL_WORDS[model]
        if peer_type:
            what = f"placer gRPC {QUANT_FLAGS[label]} vs llama.cpp {peer_type}"
            peer_words = f"llama.cpp {peer_type}"
            prefill_goal = QUANT_PREFILL_GOAL
            note = (f"llama-quantize defaults: its token_embd is {peer_type} and its output "
                    f"{'Q8_0' if label.startswith('int8') else 'Q6_K'}; placer's lm_head is int8 (one "
                    f"scale per output), its embeddings {'F32' if model == 'small' else 'BF16'}")
        else:
            what = "placer gRPC vs llama.cpp"
            peer_words = "llama.cpp"
            prefill_goal = 1.0
            note = ""
        rows.append(row(f"decode tokens/s, {words}, batch 1, {label}: {what}",
                        f"{our_decode:.1f} tok/s", f"{peer_words} {peer_decode:.1f} tok/s",
                        our_decode / peer_decode, "placer / llama.cpp", "≥ 1.0",
                        our_decode / peer_decode >= 1.0, note))
        rows.append(row(f"prompt tokens/s ({prompt}-token prompt), {words}, {label}: {what}",
                        f"{our_prefill:.1f} tok/s", f"{peer_words} {peer_prefill:.1f} tok/s",
                        our_prefill / peer_prefill, "placer / llama.cpp", f"≥ {prefill_goal:.1f}",
                        our_prefill / peer_prefill >= prefill_goal,
                        "placer's figure is time to first token through gRPC; three prompts a "
                        "round each side"))
    rows += packed_floor_rows(raw, results)
    return rows


def packed_floor_rows(raw, results):
    """The 1.1B model, BF16 and quantized, against the read-bandwidth floor of the bytes one
    decode step reads (placer-bench-model's decode_read_bytes_per_token: the BF16 or packed
    linear weights and lm_head, the norms, one embedding row), at the fastest read of the
    section (measured at its start, after the small preset's rounds, before each of these runs).
    Both issues' moonshot: 75 % of it."""
    rows = []
    for label in ["BF16", *LLAMA_CPP_QUANT_PEERS]:
        name = f"placer_in_process_tinyllama_{label}.jsonl"
        if not os.path.exists(os.path.join(raw, name)):
            continue
        read_bps, _ = best_read_bandwidth(raw)
        ours = load_jsonl(raw, name)[0]
        read_bytes = ours["decode_read_bytes_per_token"]
        step = statistics.median(pooled([ours], "step_seconds"))
        what = (f"the packed-bytes read floor, ~1.1B, {QUANT_FLAGS[label]}" if label in QUANT_FLAGS
                else "the read floor, ~1.1B, BF16 (--dtype auto)")
        floor_of_placer, floor = floor_row(f"decode vs {what} (in-process; goal is the moonshot)",
                                           step, read_bytes, read_bps, [ours], QUANT_FLOOR_GOAL)
        grpc = results.get(f"llama_cpp_tinyllama_{label}", {}).get("placer_grpc", [])
        grpc_step = statistics.median(s for r in grpc for s in r["step_seconds"][0]) if grpc else None
        if grpc_step:
            floor_of_placer["note"] = f"placer gRPC reaches {floor / grpc_step:.2f} of it"
        results[f"packed_floor_tinyllama_{label}"] = {
            "placer_in_process": ours, "packed_read_bytes_per_token": read_bytes,
            "read_bytes_per_second": read_bps, "floor_seconds_per_token": floor}
        rows.append(floor_of_placer)
    return rows


def drift_rows(raw, results):
    """--quantize against the unquantized model on the same prompts (placer-bench-model drift):
    reported, no goal (the checkpoints' weights are random, not trained)."""
    rows = []
    for model in LLAMA_CPP_MODEL_WORDS:
        for scheme in LLAMA_CPP_QUANT_PEERS:
            name = f"drift_{model}_{scheme}.json"
            if not os.path.exists(os.path.join(raw, name)):
                continue
            report = load_json(raw, name)
            drift = report["drift"]
            results[f"drift_{model}_{scheme}"] = report
            rows.append(row(f"{QUANT_FLAGS[scheme]} drift from the unquantized model, "
                            f"{LLAMA_CPP_MODEL_WORDS[model]}",
                            f"top-1 agreement {drift['top1_agreement'] * 100:.1f} %",
                            f"mean KL {drift['mean_kl']:.2g} nats (max {drift['max_kl']:.2g})",
                            None, "", None, None,
                            f"{drift['positions']} positions of {drift['prompts']} fixed "
                            "pseudo-random prompts; random-weight checkpoint"))
    return rows


def offload(raw):
    bandwidth = load_json(raw, "bandwidth.json")
    # The transfer term takes the fastest copy measured: libtorch's copy_ on all threads or
    # the staging copy (placement::CopyHostBytes, one thread) alone, so the floor is no easier
    # to reach than the machine's best copy allows.
    copy_bps = max(bandwidth[way]["bytes_per_second"] for way in ("copy", "staging_copy")
                   if way in bandwidth)
    runs = load_jsonl(raw, "decode.jsonl")
    resident = next(r for r in runs if r["layout"] == "gpu")
    compute = resident["step_seconds"]["median"]
    points, rows = [], []
    for r in runs:
        staged = statistics.median(x["staged_bytes_per_token"] for x in r["runs"])
        wait = statistics.median(x["offload_wait_seconds_per_token"] for x in r["runs"])
        transfer = staged / copy_bps
        larger = max(transfer, compute)
        step = r["step_seconds"]["median"]
        point = {"layout": r["layout"], "prefetch": r["prefetch"],
                 "fraction_offloaded": staged / r["weight_bytes"],
                 "staged_bytes_per_token": staged, "seconds_per_token": step,
                 "step_seconds": r["step_seconds"], "transfer_floor_seconds": transfer,
                 "compute_seconds": compute, "larger_floor_seconds": larger,
                 "no_overlap_seconds": transfer + compute, "offload_wait_seconds_per_token": wait,
                 "ratio_to_larger_floor": step / larger}
        points.append(point)
        if r["layout"] == "gpu":
            continue
        fully = r["layout"].startswith("all-")
        goal = "≤ 1.2" if fully and r["prefetch"] else None
        rows.append(row(f"offload {r['layout']}, prefetch {'on' if r['prefetch'] else 'off'}: "
                        f"time per token", f"{step * 1e3:.0f} ms",
                        f"max(transfer {transfer * 1e3:.0f} ms, compute {compute * 1e3:.0f} ms)",
                        step / larger, "placer / larger floor", goal,
                        step / larger <= 1.2 if goal else None,
                        f"{staged / MIB:.0f} MiB staged per token; no overlap would cost "
                        f"{(transfer + compute) * 1e3:.0f} ms; waited {wait * 1e3:.0f} ms per "
                        f"token for weights"))
    return {"what": "decode per-token time of the small preset with half / all blocks on cpu "
                    "or disk, executed on one virtual GPU (staging is a real copy), prefetch on "
                    "and off, vs the larger of (bytes staged / the fastest measured host copy "
                    "bandwidth) and the compute time of the same model resident on the virtual "
                    "GPU",
            "results": {"model": resident["dir"], "threads": resident["threads"],
                        "blas": resident["blas"], "bandwidth": bandwidth,
                        "compute_seconds_per_token": compute, "points": points, "samples": runs},
            "rows": rows}
