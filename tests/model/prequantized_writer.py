#!/usr/bin/python3
"""Writes a pre-quantized Hugging Face checkpoint and its float reference, packed as each
format documents it (AutoGPTQ's QuantLinear.pack, AutoAWQ's WQLinear_GEMM.from_linear,
compressed-tensors' pack_to_int32), independently of placer's C++ code.

usage: prequantized_writer.py BASE_DIR OUT_DIR REFERENCE_DIR FORMAT BITS GROUP_SIZE [options]
  BASE_DIR: an unquantized F32 Llama checkpoint (placer-make-checkpoint, biases included);
  FORMAT: gptq | gptq_v2 | awq | ct-pack | ct-int | ct-mixed; GROUP_SIZE -1: one group per
  column; ct-mixed: compressed-tensors "mixed-precision" with a config group "attention"
  (targets a "re:" pattern of q/k/v_proj: int-quantized 8-bit per channel, W8A8) and a group
  "rest" (targets "Linear": pack-quantized BITS/GROUP_SIZE); --ct-named=A,B (ct-mixed): a third
  group "named" targeting these full module names, pack-quantized 8-bit per channel, symmetric;
  --sym: symmetric zero points; --quantize-config-file: GPTQ's config in quantize_config.json
  instead of config.json; --act-order (GPTQ desc_act, ct-pack actorder "group"): each
  linear's inputs quantized in a random order (as GPTQ orders them by activation size),
  groups taken along that order and g_idx saying each input's group; q_proj and k_proj share an order, as do gate_proj and
  up_proj (they see the same input), v_proj, o_proj and down_proj have their own.
  --float-modules=A,B: leave these linears unquantized (a float .weight, fp16 for GPTQ and AWQ
  as their tools store them), each "self_attn.o_proj" (in every layer) or a full name
  "model.layers.1.mlp.down_proj", said in config the format's way: GPTQ
  modules_in_block_to_quantize (GPTQModel dynamic "-:" regexes with --gptq-dynamic or for full
  names), AWQ modules_to_not_convert, compressed-tensors ignore ("re:" for in-every-layer names).
  --gptq-override=REGEX:BITS:GROUP (GPTQ): the linears REGEX matches from the start stored with
  these bits and group size instead, said as GPTQModel's dynamic "+:REGEX" key's overrides.
  --lm-head (GPTQ): the untied lm_head quantized like the layers' linears (lm_head.qweight, ...)
  and config "lm_head": true, as GPTQModel's lm_head=True writes it (its outputs, the vocabulary,
  a multiple of 32 / BITS).
OUT_DIR gets the quantized checkpoint; REFERENCE_DIR the same model with every linear weight
replaced by its exact float dequantization (w = (q - z) * s), unquantized, in F32.
"""
import hashlib
import json
import os
import re
import shutil
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I8": torch.int8, "U8": torch.uint8}
NAMES = {v: k for k, v in DTYPES.items()}
LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(data[8 + n + begin:8 + n + end])
        out[name] = torch.frombuffer(raw, dtype=DTYPES[info["dtype"]]).reshape(info["shape"]).clone()
    return out


def write_safetensors(path, tensors):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def to_int32(words):
    """int64 words holding 32 bits -> int32 with the same bits (two's complement)."""
    words = words & 0xFFFFFFFF
    return torch.where(words >= 2 ** 31, words - 2 ** 32, words).to(torch.int32)


def pack_rows(values, bits):
    """[n, m] unsigned codes -> [n * bits / 32, m]: 32/bits consecutive rows per word, the
    first in the lowest bits (GPTQ qweight along the input)."""
    k = 32 // bits
    v = values.to(torch.int64).reshape(values.shape[0] // k, k, values.shape[1])
    shifts = (torch.arange(k, dtype=torch.int64) * bits).view(1, k, 1)
    return to_int32((v << shifts).sum(1))


def pack_columns(values, bits, order=None):
    """[n, m] unsigned codes -> [n, m * bits / 32]; word slot i holds column order[i]."""
    k = 32 // bits
    order = order or list(range(k))
    v = values.to(torch.int64).reshape(values.shape[0], values.shape[1] // k, k)
    v = v[:, :, order]
    shifts = (torch.arange(k, dtype=torch.int64) * bits).view(1, 1, k)
    return to_int32((v << shifts).sum(2))


def grid(w, group, bits, sym, scale_dtype, zero_range):
    """Per (output, group) scale s (in scale_dtype), integer zero z and codes q in
    [0, 2^bits) with w ~ (q - z) * s. w: [out, in] float32. Returns q [out, in] int64,
    z [out, groups] int64, s [out, groups] float32 holding scale_dtype values."""
    out, inp = w.shape
    maxq = 2 ** bits - 1
    g = w.reshape(out, inp // group, group)
    if sym:
        s = (g.abs().amax(-1) * 2 / maxq).clamp(min=1e-4)
        s = s.to(scale_dtype).to(torch.float32)
        z = torch.full_like(s, (maxq + 1) // 2, dtype=torch.int64)
    else:
        lo, hi = g.amin(-1), g.amax(-1)
        s = ((hi - lo) / maxq).clamp(min=1e-4).to(scale_dtype).to(torch.float32)
        z = torch.round(-lo / s).to(torch.int64).clamp(*zero_range)
    q = (torch.round(g / s.unsqueeze(-1)) + z.unsqueeze(-1)).clamp(0, maxq).to(torch.int64)
    return q.reshape(out, inp), z, s


def dequantize(q, z, s, group):
    out, inp = q.shape
    w = (q.reshape(out, inp // group, group) - z.unsqueeze(-1)).to(torch.float64) * s.unsqueeze(-1).double()
    return w.reshape(out, inp).to(torch.float32)


def quantize_linear(prefix, w, fmt, bits, group_size, sym, perm=None):
    """The stored tensors of one nn.Linear weight w [out, in] and its dequantization. perm
    (GPTQ act-order): the order the inputs are quantized in, groups taken along it."""
    out, inp = w.shape
    group = inp if group_size == -1 else group_size
    maxq = 2 ** bits - 1
    if fmt in ("gptq", "gptq_v2"):
        perm = torch.arange(inp) if perm is None else perm
        # v1 stores z - 1 in `bits` bits, so z must be 1..2^bits-1 there.
        q_in_perm, z, s = grid(w[:, perm], group, bits, sym, torch.float16,
                               (1 if fmt == "gptq" else 0, maxq))
        # AutoGPTQ's pack keeps the inputs in their own order; g_idx names each one's group.
        q = torch.empty_like(q_in_perm)
        q[:, perm] = q_in_perm
        g_idx = torch.empty(inp, dtype=torch.int32)
        g_idx[perm] = (torch.arange(inp) // group).to(torch.int32)
        stored_z = z - 1 if fmt == "gptq" else z
        tensors = {
            prefix + ".qweight": pack_rows(q.t().contiguous(), bits),                # [in*b/32, out]
            prefix + ".qzeros": pack_columns(stored_z.t().contiguous(), bits),       # [groups, out*b/32]
            prefix + ".scales": s.t().contiguous().to(torch.float16),               # [groups, out]
            prefix + ".g_idx": g_idx,
        }
        dequantized = torch.empty_like(w)
        dequantized[:, perm] = dequantize(q_in_perm, z, s, group)
        return tensors, dequantized
    elif fmt == "awq":
        q, z, s = grid(w, group, bits, False, torch.float16, (0, maxq))
        order = [0, 2, 4, 6, 1, 3, 5, 7]
        tensors = {
            prefix + ".qweight": pack_columns(q.t().contiguous(), bits, order),      # [in, out/8]
            prefix + ".qzeros": pack_columns(z.t().contiguous(), bits, order),       # [groups, out/8]
            prefix + ".scales": s.t().contiguous().to(torch.float16),
        }
    elif fmt == "ct-pack":
        # Signed codes c = q - 2^(bits-1), zero point zp = z - 2^(bits-1): w = (c - zp) * s;
        # pack_to_int32 stores c + 2^(bits-1) = q along the input, lowest bits first.
        half = 2 ** (bits - 1)
        ordered = perm is not None
        perm = torch.arange(inp) if perm is None else perm
        q_in_perm, z, s = grid(w[:, perm], group, bits, sym, torch.bfloat16, (0, maxq))
        q = torch.empty_like(q_in_perm)
        q[:, perm] = q_in_perm
        tensors = {
            prefix + ".weight_packed": pack_columns(q, bits),                         # [out, in*b/32]
            prefix + ".weight_scale": s.to(torch.bfloat16),                           # [out, groups]
            prefix + ".weight_shape": torch.tensor([out, inp], dtype=torch.int64),
        }
        if ordered:  # actorder "group": each input's group, inputs in their own order
            g_idx = torch.empty(inp, dtype=torch.int32)
            g_idx[perm] = (torch.arange(inp) // group).to(torch.int32)
            tensors[prefix + ".weight_g_idx"] = g_idx
        if not sym:  # symmetric: z = 2^(bits-1), zp = 0, and compressed-tensors omits it
            tensors[prefix + ".weight_zero_point"] = (z - half).to(torch.int8)
        dequantized = torch.empty_like(w)
        dequantized[:, perm] = dequantize(q_in_perm, z, s, group)
        return tensors, dequantized
    elif fmt == "ct-int":
        s = (w.abs().amax(-1, keepdim=True) / 127).clamp(min=1e-4).to(torch.float16).float()
        c = torch.round(w / s).clamp(-128, 127).to(torch.int64)
        tensors = {prefix + ".weight": c.to(torch.int8),
                   prefix + ".weight_scale": s.to(torch.float16)}                     # [out, 1]
        return tensors, dequantize(c, torch.zeros_like(s, dtype=torch.int64), s, inp)
    else:
        raise SystemExit("unknown format " + fmt)
    return tensors, dequantize(q, z, s, group)


BLOCK_LINEARS = [["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"],
                 ["self_attn.o_proj"], ["mlp.gate_proj", "mlp.up_proj"], ["mlp.down_proj"]]


MIXED_ATTENTION = r"re:.*self_attn\.(q|k|v)_proj$"


def mixed_scheme(module, bits, group_size, sym, named):
    """ct-mixed: the (format, bits, group size, sym) of a linear, by compressed-tensors'
    precedence (a full name or pattern before the "Linear" class)."""
    if module in named:
        return "ct-pack", 8, -1, True
    if re.match(MIXED_ATTENTION[3:], module):
        return "ct-int", 8, -1, True
    return "ct-pack", bits, group_size, sym


def is_float_module(module, float_modules):
    return any(module == f if f.startswith("model.") else module.endswith("." + f)
               for f in float_modules)


def float_regex(name):
    return (re.escape(name) if name.startswith("model.") else ".*\\." + re.escape(name)) + "$"


def quantization_config(fmt, bits, group_size, sym, act_order, float_modules=(), gptq_dynamic=False,
                        named=()):
    if fmt in ("gptq", "gptq_v2"):
        config = {"quant_method": "gptq", "bits": bits, "group_size": group_size, "sym": sym,
                  "desc_act": act_order, "damp_percent": 0.01, "true_sequential": True,
                  "static_groups": False, "checkpoint_format": fmt, "model_name_or_path": None,
                  "model_file_base_name": None}
        if float_modules and (gptq_dynamic or any(f.startswith("model.") for f in float_modules)):
            config["dynamic"] = {"-:" + float_regex(f): {} for f in float_modules}
        elif float_modules:
            kept = [[m for m in group if m not in float_modules] for group in BLOCK_LINEARS]
            config["modules_in_block_to_quantize"] = [g for g in kept if g]
        return config
    if fmt == "awq":
        return {"quant_method": "awq", "bits": bits, "group_size": group_size,
                "zero_point": True, "version": "gemm",
                "modules_to_not_convert": list(float_modules) or None}
    ignore = ["lm_head"] + [f if f.startswith("model.") else "re:" + float_regex(f)
                            for f in float_modules]
    if fmt == "ct-mixed":
        # Each group names its own format, as compressed-tensors writes mixed schemes.
        groups = {"attention": ct_group("ct-int", 8, -1, True, False, [MIXED_ATTENTION], True),
                  "rest": ct_group("ct-pack", bits, group_size, sym, act_order, ["Linear"], True)}
        if named:
            groups["named"] = ct_group("ct-pack", 8, -1, True, act_order, list(named), True)
    else:
        groups = {"group_0": ct_group(fmt, bits, group_size, sym, act_order, ["Linear"])}
    return {"quant_method": "compressed-tensors",
            "format": CT_FORMATS.get(fmt, "mixed-precision"),
            "quantization_status": "compressed", "global_compression_ratio": None,
            "ignore": ignore, "kv_cache_scheme": None, "sparsity_config": {},
            "config_groups": groups}


CT_FORMATS = {"ct-pack": "pack-quantized", "ct-int": "int-quantized"}


def ct_group(fmt, bits, group_size, sym, act_order, targets, own_format=False):
    """A compressed-tensors config group (QuantizationScheme) for `fmt`'s weights."""
    weights = {"num_bits": bits, "type": "int", "symmetric": sym, "dynamic": False,
               "strategy": "channel" if group_size == -1 else "group",
               "actorder": "group" if act_order else None,
               "observer": "minmax", "block_structure": None}
    if group_size != -1:
        weights["group_size"] = group_size
    inputs = None
    if fmt == "ct-int":
        inputs = {"num_bits": 8, "type": "int", "symmetric": True, "dynamic": True,
                  "strategy": "token", "group_size": None, "observer": None}
    group = {"targets": targets, "weights": weights, "input_activations": inputs,
             "output_activations": None}
    if own_format:
        group["format"] = CT_FORMATS[fmt]
    return group


FORMATS = ("gptq", "gptq_v2", "awq", "ct-pack", "ct-int", "ct-mixed")


def main(argv):
    positional = [a for a in argv if not a.startswith("--")]
    if len(positional) != 6 or positional[3] not in FORMATS or "--help" in argv:
        sys.stderr.write(__doc__)
        sys.exit(0 if "--help" in argv else 2)
    base, out_dir, ref_dir, fmt, bits, group_size = positional
    try:
        bits, group_size = int(bits), int(group_size)
    except ValueError:
        sys.exit(f"prequantized_writer.py: BITS and GROUP_SIZE must be integers, got "
                 f"{bits!r} and {group_size!r}")
    sym = "--sym" in argv
    act_order = "--act-order" in argv
    if act_order and fmt not in ("gptq", "gptq_v2", "ct-pack", "ct-mixed"):
        sys.exit("prequantized_writer.py: --act-order is GPTQ's (desc_act) and compressed-tensors "
                 "pack-quantized's (actorder \"group\")")
    lm_head = "--lm-head" in argv
    if lm_head and fmt not in ("gptq", "gptq_v2"):
        sys.exit("prequantized_writer.py: --lm-head is GPTQ's (GPTQModel lm_head: true)")
    float_modules, named = [], []
    for a in argv:
        if a.startswith("--float-modules="):
            float_modules = [f for f in a.split("=", 1)[1].split(",") if f]
        if a.startswith("--ct-named="):
            named = [f for f in a.split("=", 1)[1].split(",") if f]
    if named and fmt != "ct-mixed":
        sys.exit("prequantized_writer.py: --ct-named is ct-mixed's")
    override = None
    for a in argv:
        if a.startswith("--gptq-override="):
            pattern, o_bits, o_group = a.split("=", 1)[1].rsplit(":", 2)
            override = (pattern, int(o_bits), int(o_group))
    if override and fmt not in ("gptq", "gptq_v2"):
        sys.exit("prequantized_writer.py: --gptq-override is GPTQ's (GPTQModel dynamic)")
    torch.manual_seed(20)
    tensors = read_safetensors(os.path.join(base, "model.safetensors"))
    quantized, reference = {}, {}
    for name, t in tensors.items():
        parts = name.split(".")
        is_linear = (name.endswith(".weight") and len(parts) > 2 and parts[-2] in LINEAR) or (
            lm_head and name == "lm_head.weight")
        if is_linear and is_float_module(name[:-len(".weight")], float_modules):
            if fmt in ("gptq", "gptq_v2", "awq"):
                t = t.to(torch.float16)
            quantized[name] = t
            reference[name] = t.float()
        elif is_linear:
            module = name[:-len(".weight")]
            module_fmt, module_bits, module_group, module_sym = (
                mixed_scheme(module, bits, group_size, sym, named) if fmt == "ct-mixed"
                else (fmt, bits, group_size, sym))
            if override and re.match(override[0], module):
                module_bits, module_group = override[1], override[2]
            perm = None
            if act_order and module_fmt != "ct-int":
                shared = {"k_proj": "q_proj", "up_proj": "gate_proj"}.get(parts[-2], parts[-2])
                key = ".".join(parts[:-2] + [shared])
                seed = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
                perm = torch.randperm(t.shape[1], generator=torch.Generator().manual_seed(seed))
            if module_group != -1 and t.shape[1] % module_group:
                sys.exit(f"prequantized_writer.py: GROUP_SIZE {module_group} does not divide the "
                         f"{t.shape[1]} inputs of {name}")
            stored, dequantized = quantize_linear(module, t.float(), module_fmt, module_bits,
                                                  module_group, module_sym, perm)
            quantized.update(stored)
            reference[name] = dequantized
        else:
            # GPTQ and AWQ keep biases in fp16 next to their fp16 scales; the reference gets
            # the same values.
            if fmt in ("gptq", "gptq_v2", "awq") and name.endswith(".bias"):
                t = t.to(torch.float16)
            quantized[name] = t
            reference[name] = t.float()
    with open(os.path.join(base, "config.json")) as f:
        config = json.load(f)
    for d in (out_dir, ref_dir):
        os.makedirs(d, exist_ok=True)
        for side in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
            if os.path.exists(os.path.join(base, side)):
                shutil.copy(os.path.join(base, side), d)
    with open(os.path.join(ref_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    qconfig = quantization_config(fmt, bits, group_size, sym, act_order, float_modules,
                                  "--gptq-dynamic" in argv, named)
    if override:
        qconfig.setdefault("dynamic", {})["+:" + override[0]] = {"bits": override[1],
                                                                 "group_size": override[2]}
    if lm_head:
        if "lm_head.weight" not in tensors:
            sys.exit("prequantized_writer.py: --lm-head needs an untied lm_head.weight in BASE_DIR")
        qconfig["lm_head"] = True
    if "--quantize-config-file" in argv:
        del qconfig["quant_method"]  # AutoGPTQ's quantize_config.json has none
        with open(os.path.join(out_dir, "quantize_config.json"), "w") as f:
            json.dump(qconfig, f, indent=2)
    else:
        config["quantization_config"] = qconfig
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), quantized)
    write_safetensors(os.path.join(ref_dir, "model.safetensors"), reference)


if __name__ == "__main__":
    main(sys.argv[1:])
