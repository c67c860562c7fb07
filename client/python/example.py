#!/usr/bin/python3
"""Streams a generation from placerd with placer_client, then shows the likeliest next tokens.

    PYTHONPATH=build/client/python/gen:client/python \
        /usr/bin/python3 client/python/example.py --target 127.0.0.1:50051 1 17 300

The prompt is token ids, or text when the words are not all integers (text needs a model with
a tokenizer). Exit code 0 on success, 2 with one line on stderr when placerd says no.
"""

import argparse
import sys

from placer_client import PlacerClient, PlacerError


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompt", nargs="+", help="token ids, or words of a text prompt")
    parser.add_argument("--target", default="127.0.0.1:50051")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per call")
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--temperature", type=float, default=0.0, help="0 is greedy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ignore-eos", action="store_true")
    parser.add_argument("--token-file", help="bearer token, first non-comment line")
    parser.add_argument("--tls", action="store_true", help="TLS with the system's CAs")
    parser.add_argument("--tls-ca", help="PEM CA to trust placerd with (implies --tls)")
    parser.add_argument("--tls-cert", help="PEM client certificate (mTLS)")
    parser.add_argument("--tls-key", help="PEM client key (mTLS)")
    return parser.parse_args()


def main():
    args = parse_args()
    words = args.prompt
    numeric = all(word.lstrip("-").isdigit() for word in words)
    prompt = [int(word) for word in words] if numeric else " ".join(words)
    with PlacerClient(args.target, timeout=args.timeout, token_file=args.token_file, tls=args.tls,
                      ca_file=args.tls_ca, cert_file=args.tls_cert,
                      key_file=args.tls_key) as placer:
        info = placer.info()
        print(f"model: {info.architecture} ({info.parameter_count} parameters, {info.state})")
        generated = []
        print("tokens:", end="", flush=True)
        for chunk in placer.generate(prompt, max_new_tokens=args.max_new_tokens,
                                     temperature=args.temperature, seed=args.seed,
                                     ignore_eos=args.ignore_eos):
            for token in chunk.token_ids:
                print(f" {token}", end="", flush=True)
            generated.extend(chunk.token_ids)
            if chunk.finish_reason:
                print(f"\nfinish_reason: {chunk.finish_reason}, usage: {chunk.usage}")
        if isinstance(prompt, list):
            logits = placer.forward(prompt + generated)
            row = logits.rows()[-1]
            top = sorted(range(len(row)), key=row.__getitem__, reverse=True)[:5]
            print("next:", ", ".join(f"{token} ({row[token]:.3f})" for token in top))


if __name__ == "__main__":
    try:
        main()
    except (PlacerError, TypeError, ValueError) as error:
        print(f"example: {error}", file=sys.stderr)
        sys.exit(2)
