"""placer against Hugging Face on the same GPU (issue 22, part 3), run by scripts/gpu-check.

One random Llama checkpoint (placer-make-checkpoint, F32 so that greedy tokens compare without
BF16 ties) goes through `AutoModelForCausalLM.from_pretrained(..., device_map="auto",
max_memory=...)` and through placerd with the same budgets. Appended to the report: whether the
greedy tokens are equal, the weight bytes each keeps on the GPU, decode tokens/s of both at
batch 1 and at 8 concurrent streams, the pinned host-to-GPU bandwidth, and the ratio the
staging overlap criterion asks for (fully offloaded decode against max(transfer, compute)).

Environment: PLACER_BUILD (the build dir) and PLACER_PREFIX_LIB (the unpacked Debian libraries,
put on LD_LIBRARY_PATH for placer's binaries only, never for this interpreter).
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import torch

BUILD = os.environ["PLACER_BUILD"]
ENV = dict(os.environ, LD_LIBRARY_PATH=os.environ.get("PLACER_PREFIX_LIB", ""))
LAYERS, HIDDEN, INTERMEDIATE, VOCAB = 8, 2048, 5632, 32000
PROMPT = [(7 + 31 * i) % VOCAB for i in range(16)]
NEW_TOKENS = 32
GPU_BUDGET_MIB = 1200  # about half of the ~2.3 GB of F32 weights: both must offload
CPU_BUDGET = "64GiB"
# Only for a smoke test of the placer half without a GPU (e.g. "--devices cuda:0=4GiB").
PLACERD_EXTRA = os.environ.get("PLACER_HF_PLACERD_FLAGS", "").split()


def tool(name):
    path = os.path.join(BUILD, name)  # every executable is written to the build root
    if not os.path.exists(path):
        raise SystemExit(f"{name} not built under {BUILD}")
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pinned_h2d_gbps():
    host = torch.empty(1 << 30, dtype=torch.uint8).pin_memory()
    dev = torch.empty_like(host, device="cuda")
    dev.copy_(host, non_blocking=True)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        dev.copy_(host, non_blocking=True)
    end.record()
    torch.cuda.synchronize()
    return 5 * host.numel() / (start.elapsed_time(end) / 1e3) / 1e9


def hugging_face(model_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        model_dir, device_map="auto", dtype=torch.float32,
        max_memory={0: f"{GPU_BUDGET_MIB}MiB", "cpu": CPU_BUDGET})
    model.eval()
    on_gpu = sum(p.numel() * p.element_size() for p in model.parameters() if p.device.type == "cuda")
    ids = torch.tensor([PROMPT], device="cuda:0")
    with torch.inference_mode():
        # min_new_tokens: placer is asked with --ignore-eos; a random model may emit EOS early.
        tokens = model.generate(ids, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                                do_sample=False)[0, len(PROMPT):]
        speeds = {}
        for batch in (1, 8):
            torch.cuda.synchronize()
            t = time.perf_counter()
            model.generate(ids.repeat(batch, 1), max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                           do_sample=False)
            torch.cuda.synchronize()
            speeds[batch] = batch * NEW_TOKENS / (time.perf_counter() - t)
    device_map = dict(model.hf_device_map)
    del model
    torch.cuda.empty_cache()
    return tokens.tolist(), on_gpu, speeds, device_map


class Placerd:
    def __init__(self, model_dir, offload_dir, gpu_budget_mib):
        self.port, self.log = free_port(), tempfile.NamedTemporaryFile("w+", suffix=".log")
        self.target = f"127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [tool("placerd"), "--listen", self.target, "--model", model_dir, "--offload-dir",
             offload_dir, "--max-memory", f"0={gpu_budget_mib}MiB,cpu={CPU_BUDGET}",
             # A KV reserve sized to this run (16 + 32 tokens), not to the model's 2048
             # positions: HF reserves none, and the budgets should buy weights in both.
             "--max-seq-len", "256", "--max-batch-size", "8", *PLACERD_EXTRA], stdout=self.log, stderr=subprocess.STDOUT, env=ENV)
        deadline = time.time() + 180
        while time.time() < deadline:
            info = self.cli("info", "--json", check=False)
            if info and json.loads(info).get("state") in ("ready", "failed"):
                return
            time.sleep(1)
        raise SystemExit("placerd not ready in 180 s:\n" + self.tail())

    def cli(self, *args, check=True):
        run = subprocess.run([tool("placer"), "--target", self.target, *args], env=ENV,
                             capture_output=True, text=True)
        if check and run.returncode != 0:
            raise SystemExit(f"placer {' '.join(args)}: {run.stdout}{run.stderr}\n{self.tail()}")
        return run.stdout if run.returncode == 0 else None

    def tail(self):
        self.log.seek(0)
        return "".join(self.log.readlines()[-20:])

    def bench(self, streams):
        run = subprocess.run([tool("placer-bench-grpc"), "generate", "--target", self.target,
                              "--vocab", str(VOCAB), "--streams", str(streams), "--prompt-tokens",
                              str(len(PROMPT)), "--new-tokens", str(NEW_TOKENS)],
                             env=ENV, capture_output=True, text=True, check=True)
        return json.loads(run.stdout)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def placer(model_dir, offload_dir, gpu_budget_mib):
    daemon = Placerd(model_dir, offload_dir, gpu_budget_mib)
    try:
        info = json.loads(daemon.cli("info", "--json"))
        if info.get("state") != "ready":
            raise SystemExit(f"placerd failed to load: {info.get('error')}\n{daemon.tail()}")
        on_gpu = sum(int(d.get("weights_bytes", 0)) for d in info["devices"] if d["name"].startswith("cuda"))
        out = daemon.cli("generate", *map(str, PROMPT), "--max-new-tokens", str(NEW_TOKENS),
                         "--temperature", "0", "--ignore-eos")
        tokens = [int(t) for t in out.splitlines()[0].split()]
        speeds = {b: daemon.bench(b)["aggregate_tokens_per_second"] for b in (1, 8)}
        return tokens, on_gpu, speeds, info.get("device_map", {})
    finally:
        daemon.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--report", required=True)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="placer-hf-")
    lines = []
    try:
        model_dir = os.path.join(work, "model")
        subprocess.run([tool("placer-make-checkpoint"), "--out", model_dir, "--arch", "llama",
                        "--layers", str(LAYERS), "--hidden", str(HIDDEN), "--heads", "16",
                        "--kv-heads", "8", "--intermediate", str(INTERMEDIATE), "--vocab", str(VOCAB),
                        "--seed", "42"], env=ENV, check=True, stdout=subprocess.DEVNULL)
        bandwidth = pinned_h2d_gbps()
        hf_tokens, hf_gpu, hf_speed, hf_map = hugging_face(model_dir)
        pl_tokens, pl_gpu, pl_speed, pl_map = placer(model_dir, os.path.join(work, "off"), GPU_BUDGET_MIB)
        # Everything on the GPU, then every layer offloaded: compute and transfer bounds.
        _, _, gpu_speed, _ = placer(model_dir, os.path.join(work, "off2"), 64 * 1024)
        _, off_gpu, off_speed, _ = placer(model_dir, os.path.join(work, "off3"), 600)
        weights = sum(os.path.getsize(os.path.join(model_dir, f)) for f in os.listdir(model_dir)
                      if f.endswith(".safetensors"))
        transfer_s = (weights - off_gpu) / (bandwidth * 1e9)
        compute_s = 1 / gpu_speed[1]
        ratio = (1 / off_speed[1]) / max(transfer_s, compute_s)
        equal = hf_tokens == pl_tokens
        lines += [
            f"checkpoint: llama F32, {LAYERS} layers, hidden {HIDDEN}, {weights / 2**20:.0f} MiB; "
            f"budgets 0={GPU_BUDGET_MIB}MiB, cpu={CPU_BUDGET}; prompt {len(PROMPT)}, {NEW_TOKENS} new tokens",
            "",
            "| | Hugging Face (accelerate) | placer |",
            "|---|---|---|",
            f"| greedy tokens equal | {'yes' if equal else 'NO'} | |",
            f"| weight bytes on the GPU | {hf_gpu} | {pl_gpu} ({'>=' if pl_gpu >= hf_gpu else 'FEWER than'} HF) |",
            f"| decode tokens/s, batch 1 | {hf_speed[1]:.1f} | {pl_speed[1]:.1f} |",
            f"| decode tokens/s, 8 streams | {hf_speed[8]:.1f} | {pl_speed[8]:.1f} |",
            "",
            f"pinned host-to-device bandwidth: {bandwidth:.1f} GB/s (1 GiB copies, CUDA events)",
            f"staging overlap: fully offloaded decode {1 / off_speed[1] * 1e3:.2f} ms/token against "
            f"max(transfer {transfer_s * 1e3:.2f}, compute {compute_s * 1e3:.2f}) ms: ratio {ratio:.2f} "
            f"({'within' if ratio <= 1.2 else 'OVER'} the issue's 1.2)",
        ]
        if not equal:
            lines += [f"HF tokens:     {hf_tokens}", f"placer tokens: {pl_tokens}"]
        lines += ["", "HF device map: " + json.dumps(hf_map), "placer device map: " + json.dumps(pl_map)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
        with open(args.report, "a") as report:
            report.write("\n".join(lines) + "\n")
        print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
