#!/usr/bin/python3
"""Writes a --module-tree JSON (placement/module_tree_json.h) of a Llama-shaped model with
LAYERS decoder layers, for timing `placer plan` on a large tree.

usage: make_module_tree.py LAYERS OUT.json [--hidden 4096] [--intermediate 11008] [--vocab 32000]
"""
import argparse
import json


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("layers", type=int)
    parser.add_argument("out")
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--intermediate", type=int, default=11008)
    parser.add_argument("--vocab", type=int, default=32000)
    args = parser.parse_args()
    h, m = args.hidden, args.intermediate
    tensors = [{"name": "model.embed_tokens.weight", "shape": [args.vocab, h], "dtype": "BF16"}]
    classes = {}
    for i in range(args.layers):
        p = f"model.layers.{i}"
        classes[p] = "LlamaDecoderLayer"
        for name, shape in (("input_layernorm.weight", [h]), ("self_attn.q_proj.weight", [h, h]),
                            ("self_attn.k_proj.weight", [h, h]), ("self_attn.v_proj.weight", [h, h]),
                            ("self_attn.o_proj.weight", [h, h]),
                            ("post_attention_layernorm.weight", [h]),
                            ("mlp.gate_proj.weight", [m, h]), ("mlp.up_proj.weight", [m, h]),
                            ("mlp.down_proj.weight", [h, m])):
            tensors.append({"name": f"{p}.{name}", "shape": shape, "dtype": "BF16"})
    tensors.append({"name": "model.norm.weight", "shape": [h], "dtype": "BF16"})
    tensors.append({"name": "lm_head.weight", "shape": [args.vocab, h], "dtype": "BF16"})
    with open(args.out, "w") as f:
        json.dump({"tensors": tensors, "module_classes": classes,
                   "no_split": ["LlamaDecoderLayer"]}, f)


if __name__ == "__main__":
    main()
