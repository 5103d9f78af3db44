"""transformers' continuous batching (generate_batch, its paged cache) on the workload of
`wick bench-serve` and bench/serve_load.py: random weights of a Llama shape, R requests of P random
prompt ids, G new tokens each (greedy, no end token), C at a time.

  python3 bench/transformers_batch.py [--shape llama3-8b] [--runs R,C,G ...] [--prompt 512]

transformers has no notion of "C at a time" in generate_batch: each run hands it C requests at
once, R / C times over, and reports output tokens / wall seconds over all of them. Each call makes
its own manager, sized for its requests, and warms it up (generate_batch's defaults): that start is
in the time. Keeping one manager for all calls (persistent_manager=True) was slower on an H200
(transformers 5.17: the manager stays sized for the first call's requests). Needs torch with a GPU
and transformers >= 5 (the device machine's).
"""
import argparse
import time

SHAPES = {
    # hidden, intermediate, layers, heads, kv heads, vocab, rope theta
    "llama3-8b": (4096, 14336, 32, 32, 8, 128256, 500000.0),
    "llama3.2-1b": (2048, 8192, 16, 32, 8, 128256, 500000.0),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="llama3-8b", choices=sorted(SHAPES))
    ap.add_argument("--runs", nargs="+", default=["4,1,128", "64,16,256", "64,64,256"], help="R,C,G triples")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--attn", default="sdpa", help="attention implementation (paged by generate_batch)")
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    hidden, inter, layers, heads, kv, vocab, theta = SHAPES[args.shape]
    config = LlamaConfig(hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv, vocab_size=vocab, rope_theta=theta,
                         max_position_embeddings=8192, tie_word_embeddings=False)
    config._attn_implementation = args.attn
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"{args.shape} random bf16, attention {args.attn}")
    gen = torch.Generator().manual_seed(1)

    def prompts(n):
        return [torch.randint(0, vocab, (args.prompt,), generator=gen).tolist() for _ in range(n)]

    def config_of(g):
        return GenerationConfig(max_new_tokens=g, min_new_tokens=g, do_sample=False, eos_token_id=None,
                                pad_token_id=0)

    model.generate_batch(inputs=prompts(2), generation_config=config_of(8), progress_bar=False)  # warm-up
    for run in args.runs:
        r, c, g = (int(x) for x in run.split(","))
        tokens, start = 0, time.perf_counter()
        for _ in range(r // c):
            out = model.generate_batch(inputs=prompts(c), generation_config=config_of(g), progress_bar=False)
            tokens += sum(len(o.generated_tokens) for o in out.values())
        seconds = time.perf_counter() - start
        print(f"transformers_batch: R={r} C={c} P={args.prompt} G={g}: {tokens} tokens in {seconds:.2f} s, "
              f"{tokens / seconds:.1f} output tokens/s")


if __name__ == "__main__":
    main()
