#!/usr/bin/env python3
"""transformers' own continuous batching on the Llama-3-8B shape with random bf16 weights, on one
GPU: the peer of

  wick bench-serve --shape llama3-8b --dtype bf16 --device cuda:0 --requests N --concurrency N \
      --prompt P --gen G

N requests of P random prompt ids each are given to `generate_batch()` at once (greedy, exactly G
new tokens each: the random model has no end-of-text token); the run is timed with the GPU
synchronised on both sides, after a warm-up batch of the same shape (which also captures CUDA graphs
where transformers does). Prints the attention implementation used, output tokens/s (N * G over the
run's time) and prompt + output tokens/s.

usage: transformers_serve.py [--requests N] [--prompt P] [--gen G] [--attn IMPL ...]
"""
import argparse
import time

import torch
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=256)
    ap.add_argument("--attn", nargs="*", default=["sdpa_paged", "paged|sdpa", "sdpa"],
                    help="attention implementations to try, in order (the first that runs is timed)")
    args = ap.parse_args()
    config = LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
                         rope_parameters=dict(rope_type="default", rope_theta=500000.0), bos_token_id=None,
                         eos_token_id=None, pad_token_id=None)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).eval()
    torch.set_default_dtype(torch.float32)
    print(f"transformers {__import__('transformers').__version__}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}; Llama-3-8B shape, bf16, {args.requests} requests of "
          f"{args.prompt} prompt ids, {args.gen} new tokens each", flush=True)
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, config.vocab_size, (args.prompt,), generator=gen).tolist()
               for _ in range(args.requests)]
    config_gen = GenerationConfig(max_new_tokens=args.gen, min_new_tokens=args.gen, do_sample=False,
                                  eos_token_id=None, pad_token_id=0)

    def run():
        with torch.no_grad():
            out = model.generate_batch(inputs=prompts, generation_config=config_gen, progress_bar=False)
        return sum(len(o.generated_tokens) for o in out.values())

    for attn in args.attn:
        try:
            model.set_attn_implementation(attn)
            run()  # warm-up
            torch.cuda.synchronize()
            t = time.perf_counter()
            tokens = run()
            torch.cuda.synchronize()
            seconds = time.perf_counter() - t
        except Exception as e:  # an implementation this version lacks: the next one
            print(f"{attn}: not usable here ({type(e).__name__}: {str(e)[:200]})", flush=True)
            continue
        print(f"{attn}: {tokens} output tokens in {seconds:.2f} s: {tokens / seconds:.1f} output tokens/s, "
              f"{(tokens + args.requests * args.prompt) / seconds:.1f} prompt + output tokens/s", flush=True)
        return
    raise SystemExit("no attention implementation ran")


if __name__ == "__main__":
    main()
