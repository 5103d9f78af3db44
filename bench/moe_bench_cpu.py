#!/usr/bin/env python3
"""wick bench-model beside llama.cpp's llama-bench on the CPU for a mixture of experts, on one GGUF file.

A "qwen3moe" model of Qwen3-30B-A3B's shape (48 layers, width 2048, 32 query heads and 4 KV heads of
128 features, 128 experts of width 768 and 8 of them per token, a head of its own) with Qwen3's real
vocabulary (tokenizer.json, as scripts/model-check fetches it) and random Q4_0 weights: every matrix
is written in Q4_0 as it is, blocks of random quants and scales (64 random rows repeated), so that
the 17 GB file is made in minutes and without an F16 copy (61 GB); the router and the norms are F32.
On it, llama-bench and `wick bench-model` run a prompt of PROMPT tokens (pp) and GEN tokens decoded
one at a time (tg) with the same thread count, and the table gives both rates (tokens/s) and their
ratio. --layers makes a shallower model of the same layer shape.

Runs where python3-gguf and llama.cpp-tools are (the ROCm chroot: scripts/rocm-env run ...).

usage: moe_bench_cpu.py WICK OUT_DIR VOCAB_DIR THREADS [--prompt N] [--gen N] [--reps N] [--layers N]
"""
import os
import sys

import gguf
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models"))
from check_tokenizer import vocab_writer  # noqa: E402
from llama_bench_cpu import bench_arguments, llama_bench, wick_bench  # noqa: E402

SHAPE = dict(context=40960, dim=2048, layers=48, hidden=6144, heads=32, kv_heads=4)
HEAD_DIM, EXPERTS, EXPERTS_USED, EXPERT_HIDDEN = 128, 128, 8, 768
Q4_0_BYTES = 18  # a block of 32 values: an f16 scale, 16 bytes of 4-bit quants


def tensors(vocab, layers):
    """(name, shape in numpy order, deviation) of every tensor in file order; deviation None: a
    norm's weight (ones), 0: the router (F32)."""
    dim, q, kv = SHAPE["dim"], SHAPE["heads"] * HEAD_DIM, SHAPE["kv_heads"] * HEAD_DIM
    yield "token_embd.weight", (vocab, dim), 1.0
    for i in range(layers):
        p = f"blk.{i}."
        yield p + "attn_norm.weight", (dim,), None
        yield p + "attn_q.weight", (q, dim), 0.02
        yield p + "attn_k.weight", (kv, dim), 0.02
        yield p + "attn_v.weight", (kv, dim), 0.02
        yield p + "attn_q_norm.weight", (HEAD_DIM,), None
        yield p + "attn_k_norm.weight", (HEAD_DIM,), None
        yield p + "attn_output.weight", (dim, q), 0.01
        yield p + "ffn_norm.weight", (dim,), None
        yield p + "ffn_gate_inp.weight", (EXPERTS, dim), 0
        yield p + "ffn_gate_exps.weight", (EXPERTS, EXPERT_HIDDEN, dim), 0.01
        yield p + "ffn_up_exps.weight", (EXPERTS, EXPERT_HIDDEN, dim), 0.01
        yield p + "ffn_down_exps.weight", (EXPERTS, dim, EXPERT_HIDDEN), 0.01
    yield "output_norm.weight", (dim,), None
    yield "output.weight", (vocab, dim), 0.015


def q4_0_rows(shape, deviation, rng):
    """Q4_0 bytes of a matrix (or stack of matrices) of `shape`: 64 random rows of blocks, repeated;
    each block's scale makes the values' deviation about `deviation` (quants uniform in 0..15, less 8)."""
    cols = shape[-1]
    rows = int(np.prod(shape[:-1]))
    blocks = cols // 32
    pattern = np.empty((64, blocks, Q4_0_BYTES), dtype=np.uint8)
    scales = (rng.uniform(0.5, 1.5, (64, blocks)) * deviation / 4.6).astype(np.float16)
    pattern[:, :, :2] = scales.view(np.uint8).reshape(64, blocks, 2)
    pattern[:, :, 2:] = rng.integers(0, 256, (64, blocks, 16), dtype=np.uint8)
    flat = np.tile(pattern.reshape(64, blocks * Q4_0_BYTES), (-(-rows // 64), 1))[:rows]
    return flat.reshape(*shape[:-1], blocks * Q4_0_BYTES)


def write_model(vocab_dir, path, layers):
    shape = dict(SHAPE, layers=layers)
    w, vocab = vocab_writer("qwen3-30b-a3b-random", vocab_dir, "gpt2", "qwen2", path, shape, arch="qwen3moe",
                            rope_dims=HEAD_DIM)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(1000000.0)
    w.add_expert_count(EXPERTS)
    w.add_expert_used_count(EXPERTS_USED)
    w.add_expert_feed_forward_length(EXPERT_HIDDEN)
    specs = list(tensors(vocab, layers))
    for name, dims, dev in specs:  # the tensor infos first, then each tensor's data made and written in turn
        if dev is None or dev == 0:
            w.add_tensor_info(name, dims, np.dtype(np.float32), int(np.prod(dims)) * 4)
        else:
            byte_shape = (*dims[:-1], dims[-1] // 32 * Q4_0_BYTES)
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape)),
                              raw_dtype=gguf.GGMLQuantizationType.Q4_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(0)
    for name, dims, dev in specs:
        if dev is None:
            w.write_tensor_data(np.ones(dims, dtype=np.float32))
        elif dev == 0:
            w.write_tensor_data((rng.standard_normal(dims) * 0.3).astype(np.float32))
        else:
            w.write_tensor_data(q4_0_rows(dims, dev, rng))
    w.close()


def main():
    ap = bench_arguments(64, 32)
    ap.add_argument("--layers", type=int, default=SHAPE["layers"])
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, f"qwen3-30b-a3b-{a.layers}l-q4_0.gguf")
    if not os.path.exists(path):
        write_model(a.vocab, path, a.layers)
    theirs = llama_bench(path, a.threads, a.prompt, a.gen, a.reps)
    ours = wick_bench(a.wick, path, a.threads, a.prompt, a.gen, a.reps, a.wick_dtype)
    print(f"| file | test | llama-bench t/s | wick t/s ({a.wick_dtype}) | wick / llama-bench |")
    print("|---|---|---|---|---|")
    for test in (f"pp{a.prompt}", f"tg{a.gen}"):
        t, o = theirs.get(test, float("nan")), ours.get(test, float("nan"))
        print(f"| {os.path.basename(path)} | {test} | {t:.2f} | {o:.2f} | {o / t:.2f} |", flush=True)


if __name__ == "__main__":
    main()
