#!/usr/bin/python3
"""Writes a Llama-family checkpoint in Hugging Face layout (config.json, *.safetensors,
tokenizer.json as placer-make-checkpoint writes them) as one GGUF file with the same weights,
for llama.cpp, the CPU-speed peer of bench/run.

usage: write_gguf.py CHECKPOINT_DIR OUT.gguf --gguf-py LLAMA_CPP/gguf-py [--dtype F32|BF16]

The weights keep their values: F32 and BF16 tensors are copied bit for bit (--dtype converts
F32 to BF16 by truncating rounding-to-nearest-even, as torch does), and q_proj / k_proj rows are
reordered the way llama.cpp's own converter does (its rotary embedding pairs neighbouring
columns, Hugging Face's pairs the two halves). Only what llama-bench needs is written: the
architecture's hyperparameters and the byte-level BPE vocabulary.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
NUMPY_OF = {"F32": np.float32, "BF16": np.uint16, "F16": np.float16}


def read_safetensors(path):
    """{name: (dtype, shape, ndarray)} of one shard, read without torch."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        base = 8 + header_len
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            if info["dtype"] not in NUMPY_OF:
                sys.exit(f"write_gguf.py: {path}: tensor {name} is {info['dtype']}; "
                         "only F32, BF16 and F16 are written")
            f.seek(base + begin)
            data = np.frombuffer(f.read(end - begin), dtype=NUMPY_OF[info["dtype"]])
            out[name] = (info["dtype"], info["shape"], data.reshape(info["shape"]))
        return out


def to_bf16(values):
    """F32 -> BF16 bits, rounding to nearest even (what torch's .to(torch.bfloat16) does)."""
    bits = values.astype(np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    return ((bits + rounding) >> 16).astype(np.uint16)


def permute_for_rotary(rows, heads):
    """Hugging Face's rotate-half row order -> llama.cpp's interleaved pairs (its converter's)."""
    return (rows.reshape(heads, 2, rows.shape[0] // heads // 2, *rows.shape[1:])
            .swapaxes(1, 2).reshape(rows.shape))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("out")
    parser.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py directory")
    parser.add_argument("--dtype", choices=["F32", "BF16"], help="convert F32 weights to BF16")
    args = parser.parse_args()
    sys.path.insert(0, args.gguf_py)
    import gguf  # noqa: E402  (from the llama.cpp tree being measured)

    with open(os.path.join(args.checkpoint, "config.json")) as f:
        config = json.load(f)
    if config.get("model_type") not in ("llama", "mistral"):
        sys.exit(f"write_gguf.py: model_type {config.get('model_type')!r}: only llama and mistral")
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    hidden = config["hidden_size"]
    head_dim = config.get("head_dim") or hidden // heads

    tensors = {}
    for name in sorted(os.listdir(args.checkpoint)):
        if name.endswith(".safetensors"):
            tensors.update(read_safetensors(os.path.join(args.checkpoint, name)))

    writer = gguf.GGUFWriter(args.out, "llama")
    writer.add_name(os.path.basename(os.path.normpath(args.checkpoint)))
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(hidden)
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(config.get("rope_theta", 10000.0))
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_vocab_size(config["vocab_size"])

    with open(os.path.join(args.checkpoint, "tokenizer.json")) as f:
        tokenizer = json.load(f)
    vocab = tokenizer["model"]["vocab"]
    tokens = [""] * config["vocab_size"]
    for token, index in vocab.items():
        tokens[index] = token
    types = [gguf.TokenType.NORMAL] * len(tokens)
    for added in tokenizer.get("added_tokens", []):
        tokens[added["id"]] = added["content"]
        if added.get("special"):
            types[added["id"]] = gguf.TokenType.CONTROL
    for index, token in enumerate(tokens):
        if token == "":
            tokens[index] = f"[PAD{index}]"
            types[index] = gguf.TokenType.UNUSED
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(tokenizer["model"]["merges"])
    writer.add_bos_token_id(config.get("bos_token_id", 1))
    writer.add_eos_token_id(config.get("eos_token_id", 2))

    all_bf16 = True
    for name, (dtype, shape, data) in tensors.items():
        if name.startswith("model.layers."):
            layer, rest = name[len("model.layers."):].split(".", 1)
            if rest not in LAYER_NAMES:
                sys.exit(f"write_gguf.py: tensor {name} has no llama.cpp name")
            target = f"blk.{layer}.{LAYER_NAMES[rest]}"
        elif name in NAMES:
            target = NAMES[name]
        else:
            sys.exit(f"write_gguf.py: tensor {name} has no llama.cpp name")
        if rest_is(name, "q_proj"):
            data = permute_for_rotary(data, heads)
        elif rest_is(name, "k_proj"):
            data = permute_for_rotary(data, kv_heads)
        # llama.cpp keeps norms in F32 whatever the weights are.
        is_norm = name.endswith("norm.weight")
        if dtype == "F16":
            data = data.astype(np.float32)
            dtype = "F32"
        if dtype == "F32" and args.dtype == "BF16" and not is_norm:
            data, dtype = to_bf16(data), "BF16"
        if dtype == "BF16" and is_norm:
            data = (data.astype(np.uint32) << 16).view(np.float32)
            dtype = "F32"
        data = np.ascontiguousarray(data)
        if dtype == "BF16":
            writer.add_tensor(target, data, raw_shape=list(shape),
                              raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            all_bf16 = all_bf16 and is_norm
            writer.add_tensor(target, data)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_BF16 if all_bf16 else gguf.LlamaFileType.ALL_F32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def rest_is(name, projection):
    return name.endswith(f"self_attn.{projection}.weight") or name.endswith(f"self_attn.{projection}.bias")


if __name__ == "__main__":
    main()
