"""Collector of bench/run's `stages` section (issue 21, bench/stages.sh): decode tokens/s of a
model over 2 placerd stages on loopback against one placerd, alternated in the same run, and
the bytes the leader sends to stage 1 per generated token. Returns "results" and README "rows"."""
import json
import os
import statistics

from report_common import load_jsonl, row, stats

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def stages(raw):
    runs = load_jsonl(raw, "rounds.jsonl")
    with open(os.path.join(raw, "config.json")) as f:
        config = json.load(f)
    sides = {"1 process": [r for r in runs if r["side"] == "1 process"],
             "2 stages": [r for r in runs if r["side"] == "2 stages"]}
    steps = {side: [s for r in rs for s in r["result"]["step_seconds"][0]] for side, rs in sides.items()}
    ttfts = {side: [r["result"]["ttft_seconds"][0] for r in rs] for side, rs in sides.items()}
    step = {side: statistics.median(v) for side, v in steps.items()}
    ttft = {side: statistics.median(v) for side, v in ttfts.items()}
    tps = {side: 1 / v for side, v in step.items()}
    first = sides["2 stages"][0]
    new_tokens = first["result"]["new_tokens"]
    # The prompt's pass (one message of every prompt row) is measured alone by a 1-token
    # request; what is left is one message per decode step.
    per_decode = [(r["sent_bytes"] - r["prompt_sent_bytes"]) / (new_tokens - 1)
                  for r in sides["2 stages"]]
    per_token = [r["sent_bytes"] / new_tokens for r in sides["2 stages"]]
    hidden_bytes = config["hidden_size"] * DTYPE_BYTES.get(config.get("torch_dtype", "float32"), 4)
    tokens = {side: rs[0]["result"]["tokens"][0] for side, rs in sides.items()}
    results = {"model": {k: config.get(k) for k in ("num_hidden_layers", "hidden_size",
                                                     "vocab_size", "torch_dtype")},
               "prompt_tokens": first["result"]["prompt_tokens"], "new_tokens": new_tokens,
               "rounds": len(sides["2 stages"]),
               "step_seconds": {side: {"samples": v, **stats(v)} for side, v in steps.items()},
               "ttft_seconds": {side: {"samples": v, **stats(v)} for side, v in ttfts.items()},
               "rounds_tokens_per_second": {side: [1 / statistics.median(r["result"]["step_seconds"][0])
                                                   for r in rs] for side, rs in sides.items()},
               "leader_sent_bytes_per_request": [r["sent_bytes"] for r in sides["2 stages"]],
               "leader_sent_bytes_prompt_pass": [r["prompt_sent_bytes"] for r in sides["2 stages"]],
               "leader_sent_bytes_per_decode_step": stats(per_decode),
               "leader_sent_bytes_per_generated_token": stats(per_token),
               "hidden_state_bytes_per_row": hidden_bytes,
               "greedy_tokens_identical": tokens["1 process"] == tokens["2 stages"],
               "greedy_tokens_round1": tokens, "samples": runs}
    hop_ms = (step["2 stages"] - step["1 process"]) * 1e3
    ratio = tps["2 stages"] / tps["1 process"]
    same = "same greedy tokens" if results["greedy_tokens_identical"] else "**greedy tokens differ**"
    decode_step = statistics.median(per_decode)
    rows = [
        row("decode tokens/s, small, batch 1: 2 stages on loopback", f"{tps['2 stages']:.2f} tok/s",
            f"1 process {tps['1 process']:.2f} tok/s", ratio, "2 stages / 1 process", None, None,
            f"median step of {len(sides['2 stages'])} alternated rounds; the hop costs "
            f"{hop_ms:.1f} ms per token; {same}"),
        row("time to first token (16-token prompt): 2 stages", f"{ttft['2 stages'] * 1e3:.1f} ms",
            f"1 process {ttft['1 process'] * 1e3:.1f} ms", ttft["1 process"] / ttft["2 stages"],
            "1 process / 2 stages", None, None),
        row("bytes per hop per decode token (leader → stage 1)", f"{decode_step:.0f} B",
            f"hidden states {hidden_bytes} B (one row)", decode_step / hidden_bytes,
            "wire / hidden states", None, None,
            f"header, layout and hidden states; {statistics.median(per_token):.0f} B per generated "
            f"token over a whole {new_tokens}-token request with its prompt pass; the last stage "
            f"answers with the hidden states again"),
    ]
    return {"what": "decode of the small preset (F32) served by 2 placerd stages on loopback "
                    "(Gloo over TCP; bench/stages.sh) against one placerd on the same virtual "
                    "devices, alternated in rounds through gRPC (batch 1, greedy)",
            "results": results, "rows": rows}
