#!/usr/bin/python3
"""The peer of placer's decode benchmark: plain PyTorch eager (Debian's python3-torch) on the
same safetensors, batch 1, greedy, with a KV cache: the loop a Hugging Face `generate` runs,
written out without transformers (not installable here). Weights are loaded with
tests/model/reference_forward.py (the reference the forward tests check placer against) and
the per-layer math is the same as there; only the KV cache is added.

usage: torch_eager_decode.py DIR [--threads 2] [--prompt-tokens 64] [--new-tokens 32] [--runs 3]
Prints one JSON object shaped like `placer-bench-model decode`'s. Llama family only.
"""
import argparse
import json
import math
import os
import re
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "model"))
import reference_forward as ref  # noqa: E402


def prompt_tokens(count, vocab, variant=0):
    """The ids bench/bench_common.cc PromptTokens gives, so both sides run the same prompt."""
    return [(variant * 7919 + i * 104729 + 1) % vocab for i in range(count)]


class LlamaDecoder:
    def __init__(self, config, weights):
        self.c = config
        self.w = weights
        self.heads = config["num_attention_heads"]
        self.kv_heads = config.get("num_key_value_heads", self.heads)
        self.head_dim = config.get("head_dim") or config["hidden_size"] // self.heads
        self.eps = config["rms_norm_eps"]
        self.layers = config["num_hidden_layers"]
        self.inv_freq = ref.llama_inverse_frequencies(config, self.head_dim, 0)
        tied = config.get("tie_word_embeddings")
        self.head = weights["model.embed_tokens.weight"] if tied else weights["lm_head.weight"]

    def rms_norm(self, x, weight):
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def new_cache(self, capacity):
        shape = (self.kv_heads, capacity, self.head_dim)
        return {"length": 0, "k": [torch.empty(shape) for _ in range(self.layers)],
                "v": [torch.empty(shape) for _ in range(self.layers)]}

    def extend(self, cache, tokens):
        """Runs `tokens` after what the cache holds; returns the last position's logits."""
        w, start, n = self.w, cache["length"], len(tokens)
        end = start + n
        freqs = torch.outer(torch.arange(start, end).float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        # Query j (position start+j) sees keys 0..start+j.
        mask = torch.ones(n, end, dtype=torch.bool).triu(diagonal=start + 1)
        repeat = self.heads // self.kv_heads
        h = w["model.embed_tokens.weight"][torch.tensor(tokens)]
        for i in range(self.layers):
            p = f"model.layers.{i}."
            x = self.rms_norm(h, w[p + "input_layernorm.weight"])

            def proj(name, heads):
                y = F.linear(x, w[p + f"self_attn.{name}.weight"], w.get(p + f"self_attn.{name}.bias"))
                return y.view(n, heads, self.head_dim).transpose(0, 1)

            q, k, v = proj("q_proj", self.heads), proj("k_proj", self.kv_heads), proj("v_proj", self.kv_heads)
            q = q * cos + ref.rotate_half(q) * sin
            k = k * cos + ref.rotate_half(k) * sin
            cache["k"][i][:, start:end] = k
            cache["v"][i][:, start:end] = v
            keys = cache["k"][i][:, :end].repeat_interleave(repeat, dim=0)
            values = cache["v"][i][:, :end].repeat_interleave(repeat, dim=0)
            scores = (q @ keys.transpose(-1, -2)) / math.sqrt(self.head_dim)
            attended = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ values
            h = h + F.linear(attended.transpose(0, 1).reshape(n, -1), w[p + "self_attn.o_proj.weight"])
            y = self.rms_norm(h, w[p + "post_attention_layernorm.weight"])
            gate = F.linear(y, w[p + "mlp.gate_proj.weight"])
            h = h + F.linear(F.silu(gate) * F.linear(y, w[p + "mlp.up_proj.weight"]), w[p + "mlp.down_proj.weight"])
        cache["length"] = end
        # Only the last position's logits: what generate needs (transformers' logits_to_keep=1).
        return F.linear(self.rms_norm(h[-1:], w["model.norm.weight"]), self.head)


def blas_in_use():
    """The BLAS library this process really mapped (as placer's BlasLibraryInUse does)."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "blas" in line.lower() and "/" in line}
    return sorted(paths)


def summary(samples):
    s = sorted(samples)
    n = len(s)
    if n == 0:
        return {"count": 0}
    median = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    return {"count": n, "median": median, "min": s[0], "max": s[-1], "mean": sum(s) / n,
            "p99": s[max(math.ceil(0.99 * n), 1) - 1]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with open(os.path.join(args.dir, "config.json")) as f:
        config = json.load(f)
    if config["model_type"] not in ("llama", "mistral", "qwen2"):
        sys.exit(f"torch_eager_decode.py: {args.dir}/config.json: model_type "
                 f"{config['model_type']!r} is not a Llama-family model")
    started = time.perf_counter()
    model = LlamaDecoder(config, ref.load_checkpoint(args.dir))
    load_seconds = time.perf_counter() - started
    prompt = prompt_tokens(args.prompt_tokens, config["vocab_size"])
    runs, prefill_all, step_all = [], [], []
    with torch.inference_mode():
        for run in range(args.runs + 1):  # run 0 warms up with a few tokens, not counted
            generate = min(args.new_tokens, 3) if run == 0 else args.new_tokens
            cache = model.new_cache(args.prompt_tokens + args.new_tokens)
            t = time.perf_counter()
            tokens = [int(model.extend(cache, prompt).argmax())]
            prefill = time.perf_counter() - t
            steps = []
            for _ in range(generate - 1):
                t = time.perf_counter()
                tokens.append(int(model.extend(cache, [tokens[-1]]).argmax()))
                steps.append(time.perf_counter() - t)
            if run == 0:
                continue
            prefill_all.append(prefill)
            step_all += steps
            runs.append({"prefill_seconds": prefill, "step_seconds": steps, "tokens": tokens})
    print(json.dumps({
        "dir": args.dir, "peer": "pytorch-eager", "torch_version": torch.__version__,
        "threads": torch.get_num_threads(), "blas": blas_in_use(),
        "torch_blas_config": re.findall(r"(?:BLAS|LAPACK)_INFO=\w+", torch.__config__.show()),
        "load_seconds": load_seconds, "prompt_tokens": args.prompt_tokens,
        "new_tokens": args.new_tokens, "runs": runs,
        "prefill_seconds": summary(prefill_all), "step_seconds": summary(step_all)}))


if __name__ == "__main__":
    main()
