#!/usr/bin/env python3
"""transformers' speed on the Llama-3-8B shape with random bf16 weights, batch 1, on one GPU: the
peer of `wick bench-model --shape llama3-8b --dtype bf16 --device cuda:0`.

Prints, as wick bench-model does, pp512 (a 512-token prompt's forward pass, tokens/s; eager, sdpa
attention) and tg128 (decode tokens/s over 128 new tokens after a 16-token prompt: the time of
generating 129 tokens less that of 1, over 128) for each configuration:
  eager     the default (dynamic cache, sdpa attention)
  compiled  static cache, which transformers' generate() compiles itself (torch.compile,
            mode "reduce-overhead": CUDA graphs), its fastest documented setup for decoding.
            (Wrapping model.forward in torch.compile by hand as well failed with transformers 5.17
            and torch 2.11: the static cache's index_copy_ wrote into a CUDA graph's output.)
Timing: CUDA-synchronised wall clock, median of --reps runs after a warm-up run.

usage: transformers_llama.py [--reps N] [--no-compile | --only-compiled]
"""
import argparse
import statistics
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def timed(fn, reps):
    fn()  # warm-up (and compilation)
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--only-compiled", action="store_true", help="skip the eager measurements")
    args = ap.parse_args()
    config = LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
                         rope_parameters=dict(rope_type="default", rope_theta=500000.0), bos_token_id=None,
                         eos_token_id=None, pad_token_id=None)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).eval()
    torch.set_default_dtype(torch.float32)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    print(f"transformers {__import__('transformers').__version__}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}; Llama-3-8B shape, bf16 weights {weights / 2**30:.2f} GiB")
    gen = torch.Generator(device="cuda").manual_seed(0)
    prompt = torch.randint(0, config.vocab_size, (1, 512), device="cuda", generator=gen)

    def prefill():
        with torch.no_grad():
            model(prompt, use_cache=False)

    def decode_rate(**kw):
        def run(n):
            with torch.no_grad():
                model.generate(prompt[:, :16], max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0, **kw)
        one = timed(lambda: run(1), args.reps)
        many = timed(lambda: run(129), args.reps)
        return 128 / (many - one)

    if not args.only_compiled:
        pp = 512 / timed(prefill, args.reps)
        print(f"eager     pp512 {pp:9.1f} tokens/s", flush=True)
        print(f"eager     tg128 {decode_rate():9.1f} tokens/s", flush=True)
    if not args.no_compile:
        print(f"compiled  tg128 {decode_rate(cache_implementation='static'):9.1f} tokens/s", flush=True)


if __name__ == "__main__":
    main()
