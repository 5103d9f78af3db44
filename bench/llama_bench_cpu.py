#!/usr/bin/env python3
"""wick bench-model beside llama.cpp's llama-bench on the CPU, on the same GGUF files.

A model of Llama 3.2 1B's shape (16 layers, dim 2048, MLP 8192, 32 heads, 8 KV heads) with random
F16 weights and Llama 3's real vocabulary (tokenizer.json, as scripts/model-check fetches it) is
written with gguf.GGUFWriter; llama-quantize makes Q8_0 and Q4_0 copies. On each file, llama-bench
and `wick bench-model` run a prompt of PROMPT tokens (pp) and GEN tokens decoded one at a time
(tg) with the same thread count, and the table gives both rates (tokens/s) and their ratio.

Runs where python3-gguf and llama.cpp-tools are (the ROCm chroot: scripts/rocm-env run ...).

usage: llama_bench_cpu.py WICK OUT_DIR VOCAB_DIR THREADS [--prompt N] [--gen N] [--reps N]
       [--types f16,q8_0,q4_0] [--wick-dtype f32]
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models"))
from check_llama import llama_tensors  # noqa: E402
from check_tokenizer import vocab_writer, write_gguf  # noqa: E402

SHAPE = dict(context=4096, dim=2048, layers=16, hidden=8192, heads=32, kv_heads=8)


def write_model(vocab_dir, path):
    """Random F16 weights: a block of 64 random rows per matrix, repeated (valid, quickly made);
    the embedding is the head too (tied, as in Llama 3.2 1B)."""
    w, vocab = vocab_writer("llama3-1b-random", vocab_dir, "gpt2", "llama-bpe", path, SHAPE)
    w.add_rope_freq_base(500000.0)
    rng = np.random.default_rng(0)
    for name, rows, cols, scale in llama_tensors(SHAPE, vocab, tied=True):
        if rows is None:
            w.add_tensor(name, np.ones(cols, dtype=np.float32))
        else:
            block = (rng.standard_normal((64, cols)) * (scale / 10)).astype(np.float16)
            w.add_tensor(name, np.tile(block, (-(-rows // 64), 1))[:rows])
    write_gguf(w)


def llama_bench(path, threads, prompt, gen, reps):
    out = subprocess.run(["llama-bench", "-m", path, "-t", str(threads), "-p", str(prompt), "-n", str(gen),
                          "-r", str(reps), "-o", "csv"], check=True, capture_output=True, text=True).stdout
    rows = [l.split(",") for l in out.splitlines()]
    head = [h.strip('"') for h in rows[0]]
    rates = {}
    for r in rows[1:]:
        rec = dict(zip(head, [x.strip('"') for x in r]))
        test = f"pp{rec['n_prompt']}" if int(rec["n_prompt"]) > 0 else f"tg{rec['n_gen']}"
        rates[test] = float(rec["avg_ts"])
    return rates


def wick_bench(wick, path, threads, prompt, gen, reps, dtype):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    out = subprocess.run([wick, "bench-model", "--model", path, "--prompt", str(prompt), "--gen", str(gen), "--reps",
                          str(reps), "--dtype", dtype], check=True, capture_output=True, text=True, env=env).stdout
    rates = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 8 and re.fullmatch(r"(pp|tg)\d+", cells[6]):
            rates[cells[6]] = float(cells[7])
    return rates


def bench_arguments(prompt, gen):
    """The arguments every CPU comparison takes: wick's binary, the output folder, the vocabulary's
    folder, the threads, and the tests' lengths (defaults `prompt` and `gen`), repetitions and wick's
    activation dtype."""
    ap = argparse.ArgumentParser()
    ap.add_argument("wick")
    ap.add_argument("out")
    ap.add_argument("vocab")
    ap.add_argument("threads", type=int)
    ap.add_argument("--prompt", type=int, default=prompt)
    ap.add_argument("--gen", type=int, default=gen)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--wick-dtype", default="f32")
    return ap


def main():
    ap = bench_arguments(512, 128)
    ap.add_argument("--types", default="f16,q8_0,q4_0")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    f16 = os.path.join(a.out, "llama3-1b-f16.gguf")
    if not os.path.exists(f16):
        write_model(a.vocab, f16)
    print(f"| file | test | llama-bench t/s | wick t/s ({a.wick_dtype}) | wick / llama-bench |")
    print("|---|---|---|---|---|")
    for kind in a.types.split(","):
        path = f16 if kind == "f16" else os.path.join(a.out, f"llama3-1b-{kind}.gguf")
        if not os.path.exists(path):
            subprocess.run(["llama-quantize", f16, path, kind.upper()], check=True, capture_output=True)
        theirs = llama_bench(path, a.threads, a.prompt, a.gen, a.reps)
        ours = wick_bench(a.wick, path, a.threads, a.prompt, a.gen, a.reps, a.wick_dtype)
        for test in (f"pp{a.prompt}", f"tg{a.gen}"):
            t, o = theirs.get(test, float("nan")), ours.get(test, float("nan"))
            print(f"| {kind} | {test} | {t:.2f} | {o:.2f} | {o / t:.2f} |", flush=True)


if __name__ == "__main__":
    main()
