#!/usr/bin/python3
"""Plain PyTorch eager reference for placer's forward pass, written from the Hugging Face
transformers modeling code (modeling_llama.py, modeling_gpt2.py) without importing it.

usage: reference_forward.py CHECKPOINT_DIR TOKEN_IDS(comma-separated) OUT_FILE
Writes the float32 logits of every position, row-major, to OUT_FILE.
"""
import json
import math
import os
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "F64": torch.float64, "I64": torch.int64, "I32": torch.int32}


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(data[base + begin:base + end])
        tensor = torch.frombuffer(raw, dtype=DTYPES[info["dtype"]]) if raw else torch.empty(0)
        tensors[name] = tensor.reshape(info["shape"]).to(torch.float32)
    return tensors


def load_checkpoint(directory):
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    weights = {}
    for name in files:
        weights.update(load_safetensors(os.path.join(directory, name)))
    return weights


def causal_softmax_attention(q, k, v, window=0):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    length = q.shape[-2]
    mask = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)
    if window:
        # transformers' sliding window: position i sees keys j with i - window < j <= i.
        mask = mask | torch.tril(torch.ones(length, length, dtype=torch.bool), diagonal=-window)
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores.float(), dim=-1) @ v


def llama_inverse_frequencies(config, head_dim, length):
    theta = config.get("rope_theta", 10000.0)
    scaling = config.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    max_positions = config["max_position_embeddings"]
    if kind == "dynamic" and length > max_positions:
        factor = scaling["factor"]
        theta = theta * ((factor * length / max_positions) - (factor - 1)) ** (head_dim / (head_dim - 2))
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    if kind == "linear":
        inv_freq = inv_freq / scaling["factor"]
    elif kind == "llama3":
        factor = scaling["factor"]
        low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / low, old / high
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        inv_freq = torch.where(medium, smoothed, scaled)
    return inv_freq


def attention_window(config, layer):
    window = config.get("sliding_window") or 0
    if config["model_type"] == "mistral":
        return window
    if config["model_type"] == "qwen2" and config.get("use_sliding_window"):
        return window if layer >= config.get("max_window_layers", 0) else 0
    return 0


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def llama_forward(config, w, tokens):
    hidden_size = config["hidden_size"]
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim") or hidden_size // heads
    eps = config["rms_norm_eps"]
    length = len(tokens)

    def rms_norm(x, weight):
        variance = x.pow(2).mean(-1, keepdim=True)
        return weight * (x * torch.rsqrt(variance + eps))

    inv_freq = llama_inverse_frequencies(config, head_dim, length)
    freqs = torch.outer(torch.arange(length).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()

    def linear(x, module):
        # nn.Linear; config.json's attention_bias / mlp_bias (Qwen2: q/k/v always) decide
        # whether the checkpoint has the bias, and the loader checks it against them.
        y = x @ w[module + ".weight"].T
        bias = w.get(module + ".bias")
        return y if bias is None else y + bias

    h = w["model.embed_tokens.weight"][torch.tensor(tokens)]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        x = rms_norm(h, w[p + "input_layernorm.weight"])

        def proj(name, n):
            return linear(x, p + f"self_attn.{name}").view(length, n, head_dim).transpose(0, 1)

        q, k, v = proj("q_proj", heads), proj("k_proj", kv_heads), proj("v_proj", kv_heads)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        repeat = heads // kv_heads
        k = k[:, None].expand(kv_heads, repeat, length, head_dim).reshape(heads, length, head_dim)
        v = v[:, None].expand(kv_heads, repeat, length, head_dim).reshape(heads, length, head_dim)
        attended = causal_softmax_attention(q, k, v, attention_window(config, i))
        attended = attended.transpose(0, 1).reshape(length, heads * head_dim)
        h = h + linear(attended, p + "self_attn.o_proj")
        y = rms_norm(h, w[p + "post_attention_layernorm.weight"])
        gate = linear(y, p + "mlp.gate_proj")
        up = linear(y, p + "mlp.up_proj")
        h = h + linear(gate * torch.sigmoid(gate) * up, p + "mlp.down_proj")
    h = rms_norm(h, w["model.norm.weight"])
    head = w["model.embed_tokens.weight"] if config.get("tie_word_embeddings") else w["lm_head.weight"]
    return h @ head.T


def gpt2_forward(config, w, tokens):
    hidden_size = config["n_embd"]
    heads = config["n_head"]
    head_dim = hidden_size // heads
    eps = config["layer_norm_epsilon"]
    length = len(tokens)

    def layer_norm(x, prefix):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps) * w[prefix + ".weight"] + w[prefix + ".bias"]

    def gelu_new(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))

    h = w["transformer.wte.weight"][torch.tensor(tokens)] + w["transformer.wpe.weight"][:length]
    for i in range(config["n_layer"]):
        p = f"transformer.h.{i}."
        x = layer_norm(h, p + "ln_1")
        qkv = x @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (t.view(length, heads, head_dim).transpose(0, 1) for t in qkv.split(hidden_size, -1))
        attended = causal_softmax_attention(q, k, v).transpose(0, 1).reshape(length, hidden_size)
        h = h + attended @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        y = layer_norm(h, p + "ln_2")
        m = gelu_new(y @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        h = h + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    h = layer_norm(h, "transformer.ln_f")
    tied = config.get("tie_word_embeddings", True)
    return h @ (w["transformer.wte.weight"] if tied else w["lm_head.weight"]).T


def main():
    directory, token_text, out_path = sys.argv[1:4]
    tokens = [int(t) for t in token_text.split(",")]
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    weights = load_checkpoint(directory)
    with torch.no_grad():
        if config["model_type"] == "gpt2":
            logits = gpt2_forward(config, weights, tokens)
        else:
            logits = llama_forward(config, weights, tokens)
    with open(out_path, "wb") as f:
        f.write(logits.to(torch.float32).contiguous().numpy().tobytes())


if __name__ == "__main__":
    main()
