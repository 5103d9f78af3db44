#!/usr/bin/env python3
"""The external check of wick's GGUF block formats (include/wick/quant.h) against python3-gguf's
gguf.quants, ggml's own C reference and llama.cpp's llama-quantize, through the quant_io bridge
(tests/quant/quant_io.cpp). scripts/quant-check runs it in the ROCm chroot, where Debian packages
those tools:

  check_gguf.py QUANT_IO SCRATCH_DIR [--llama-quantize PATH] [--libggml LIB] [--seed N]

1. Quantization: Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 of random and hostile values (zeros, outliers,
   values past f16's range and up to FLT_MAX, subnormals, constant blocks, ties, mixed row scales)
   against gguf.quants.quantize, byte for byte. Where the two differ, ggml's C quantizer decides:
   gguf.quants is a numpy port of it and may stray on edge cases.
2. Dequantization: every type gguf.quants reads (those five and Q2_K..Q6_K, and Q8_1 read as the
   Q8_0 it extends), of wick's blocks and of random bytes (f16 scales of every bit pattern, inf and
   NaN among them), against gguf.quants.dequantize, bit for bit (a NaN matches any NaN).
3. ggml's C reference (quantize_row_*_ref, dequantize_row_* in libggml-base, which llama.cpp-tools
   depends on): the same data in every format wick has, K-quants, Q8_1 and Q8_K included.
4. llama-quantize: a two-layer llama model of random f32 weights, quantized to each file type. Every
   quantized tensor must dequantize bit for bit as gguf.quants does, and wick's quantization of the
   same f32 weights must give llama-quantize's blocks or a squared error no larger than theirs.

Prints `gguf check: N checks passed, M failed`; exits 1 on any failure.
"""
import argparse
import ctypes
import ctypes.util
import importlib.metadata
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

# gguf.quants has quantizers for these only; the K-quants it can only dequantize.
QUANTIZE_TYPES = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
DEQUANTIZE_TYPES = QUANTIZE_TYPES + [T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]
# Every format of quant.h; ggml has no dequantize_row_q8_1 (Q8_1 only feeds its dot products).
WICK_TYPES = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q8_1, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.Q8_K]
GGML_DEQUANTIZE_TYPES = [t for t in WICK_TYPES if t != T.Q8_1]
LLAMA_FTYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S", "Q4_K_S", "Q4_K_M", "Q5_K_S",
                "Q5_K_M", "Q6_K"]
COLS = 512  # a multiple of 256: every format's block fits a row
RANDOM_ROWS = 256  # rows of random bytes per format: a few hundred blocks with inf or NaN scales
FLT_MAX = float(np.finfo(np.float32).max)
# Relative slack on squared error where wick's blocks differ from llama-quantize's: the same error
# summed in another order.
SSE_SLACK = 1e-6


def name_of(qtype):
    return qtype.name.lower()


class Tally:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAIL: {what}")
        return ok


def run_tool(argv, what):
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-6:])
        raise RuntimeError(f"{what} exited {r.returncode}: {tail}")


class Wick:
    """quant_io over files in the scratch directory."""

    def __init__(self, quant_io, scratch):
        self.quant_io = quant_io
        self.scratch = scratch

    def quantize(self, qtype, x):
        x = np.ascontiguousarray(x, dtype=np.float32)
        src, dst = os.path.join(self.scratch, "in.f32"), os.path.join(self.scratch, "out.blocks")
        x.tofile(src)
        run_tool([self.quant_io, "quantize", name_of(qtype), str(x.shape[0]), str(x.shape[1]), src, dst],
                 f"quant_io quantize {name_of(qtype)}")
        return np.fromfile(dst, dtype=np.uint8).reshape(x.shape[0], -1)

    def dequantize(self, qtype, rows, cols, blocks):
        src, dst = os.path.join(self.scratch, "in.blocks"), os.path.join(self.scratch, "out.f32")
        np.ascontiguousarray(blocks, dtype=np.uint8).tofile(src)
        run_tool([self.quant_io, "dequantize", name_of(qtype), str(rows), str(cols), src, dst],
                 f"quant_io dequantize {name_of(qtype)}")
        return np.fromfile(dst, dtype=np.float32).reshape(rows, cols)

    def gguf_list(self, path):
        dst = os.path.join(self.scratch, "listing.txt")
        run_tool([self.quant_io, "gguf-list", path, dst], f"quant_io gguf-list {os.path.basename(path)}")
        with open(dst) as f:
            return f.read().splitlines()

    def gguf_copy(self, path, dst):
        run_tool([self.quant_io, "gguf-copy", path, dst], f"quant_io gguf-copy {os.path.basename(path)}")


class Ggml:
    """ggml's C reference from libggml-base through ctypes, in a child process: an assertion inside
    ggml then ends the child, not the check."""

    def __init__(self, lib, scratch):
        self.lib = lib
        self.scratch = scratch

    def _run(self, op, qtype, n, data, out_bytes):
        src, dst = os.path.join(self.scratch, "ggml.in"), os.path.join(self.scratch, "ggml.out")
        data.tofile(src)
        run_tool([sys.executable, os.path.abspath(__file__), "--ggml-child", self.lib, op, qtype.name, str(n),
                  str(out_bytes), src, dst], f"ggml {op} {name_of(qtype)}")
        return np.fromfile(dst, dtype=np.uint8)

    def quantize(self, qtype, x):
        x = np.ascontiguousarray(x, dtype=np.float32)
        block, size = GGML_QUANT_SIZES[qtype]
        return self._run("quantize", qtype, x.size, x, x.size // block * size).reshape(x.shape[0], -1)

    def dequantize(self, qtype, rows, cols, blocks):
        data = np.ascontiguousarray(blocks, dtype=np.uint8)
        out = self._run("dequantize", qtype, rows * cols, data, rows * cols * 4)
        return out.view(np.float32).reshape(rows, cols)


def ggml_child(lib, op, type_name, n, out_bytes, src, dst):
    # ggml spells the K-quants "q4_K": quantize_row_q4_K_ref, dequantize_row_q4_K.
    ggml_name = type_name[0].lower() + type_name[1:]
    symbol = f"quantize_row_{ggml_name}_ref" if op == "quantize" else f"dequantize_row_{ggml_name}"
    fn = getattr(ctypes.CDLL(lib), symbol)
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    with open(src, "rb") as f:
        data = f.read()
    inp = ctypes.create_string_buffer(data, len(data))
    out = ctypes.create_string_buffer(int(out_bytes))
    fn(inp, out, int(n))
    with open(dst, "wb") as f:
        f.write(out.raw)
    return 0


def ref_quantize(qtype, x):
    # Casts of overflowing scales to f16 and of inf/NaN levels to integers warn; they are the cases.
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gguf.quants.quantize(np.ascontiguousarray(x, dtype=np.float32), qtype)


def ref_dequantize(qtype, rows, blocks):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gguf.quants.dequantize(np.ascontiguousarray(blocks, dtype=np.uint8).reshape(rows, -1), qtype)


def bit_differences(a, b):
    """Flat indices where a and b (f32) differ: in bits, or in being NaN (NaN payloads may differ)."""
    a, b = a.reshape(-1), b.reshape(-1)
    na, nb = np.isnan(a), np.isnan(b)
    return np.flatnonzero((na != nb) | (~na & (a.view(np.uint32) != b.view(np.uint32))))


def block_differences(qtype, a, b):
    size = GGML_QUANT_SIZES[qtype][1]
    return np.flatnonzero((a.reshape(-1, size) != b.reshape(-1, size)).any(axis=1))


def show_blocks(qtype, x, blocks, indices, where, limit=3):
    """Prints the first of the given blocks: the input values, then each named version's bytes."""
    block, size = GGML_QUANT_SIZES[qtype]
    values = x.reshape(-1, block)
    for i in indices[:limit]:
        row, col = divmod(int(i) * block, x.shape[1])
        print(f"  {name_of(qtype)} {where}, row {row}, values {col}..{col + block - 1}:")
        print(f"    input       {np.array2string(values[i], precision=9, max_line_width=200, threshold=10**6)}")
        for label, b in blocks:
            print(f"    {label:<11} {bytes(b.reshape(-1, size)[i]).hex()}")


# ---- data ----------------------------------------------------------------------------------------


def hostile_sets(rng):
    """(name, rows x COLS f32) pairs: ordinary values and the edges of the block formats."""
    sets = []

    def normal(rows, scale=1.0):
        return (rng.standard_normal((rows, COLS)) * scale).astype(np.float32)

    def one_per_block(x, values, block=32):
        # One of `values` at a random place in each 32-value block (so in every 256 too).
        blocks = x.reshape(-1, block)
        pos = rng.integers(0, block, blocks.shape[0])
        blocks[np.arange(blocks.shape[0]), pos] = rng.choice(values, blocks.shape[0])
        return x

    sets.append(("random N(0,1)", normal(16)))
    sets.append(("zeros", np.zeros((2, COLS), np.float32)))
    sets.append(("negative zeros", np.full((1, COLS), -0.0, np.float32)))
    sets.append(("one outlier of +-1e4 per block", one_per_block(normal(4), [1e4, -1e4])))
    sets.append(("one outlier of +-6e4 per block", one_per_block(normal(4), [6e4, -6e4])))
    # Scales past f16's largest value (65504; 65520 rounds to inf) for each format: amax / 8 for
    # Q4_0, (max - min) / 15 for Q4_1, amax / 127 for Q8_0, and the minimum itself for Q4_1/Q5_1.
    edges = [6.5e4, 65504, 65519, 65520, 7e4, 5.3e5, 1.1e6, 8.4e6, 1e9, 1e20]
    x = rng.uniform(-1, 1, (len(edges), COLS)).astype(np.float32) * np.float32(edges)[:, None]
    sets.append(("values near and past f16's range", one_per_block(x, [6.6e4, -6.6e4])))
    # Finite values near FLT_MAX: max - min overflows f32 in Q4_1/Q5_1, amax / 8 stays finite.
    x = normal(6)
    x[0] = rng.uniform(-1, 1, COLS) * 3e38
    x[1, ::2] = FLT_MAX
    x[1, 1::2] = -FLT_MAX
    x[2, :256] = 3e38
    x[3] = one_per_block(normal(1), [3e38, -3e38, FLT_MAX, -FLT_MAX])[0]
    x[4, 32:64] = -FLT_MAX
    x[5] = np.abs(x[5]) * 1e38
    sets.append(("values near FLT_MAX", x))
    # Subnormal inputs (1/d overflows to inf) and tiny normal ones whose f16 scales are subnormal or 0.
    x = np.zeros((8, COLS), np.float32)
    x[0] = 1e-40
    x[1] = np.where(rng.random(COLS) < 0.5, 1e-45, -1e-45)
    x[2] = rng.uniform(-1.17e-38, 1.17e-38, COLS)
    x[3] = rng.standard_normal(COLS) * 1e-39
    x[4] = one_per_block(normal(1, 1e-40), [1e-38, -1e-38])[0]
    x[5] = normal(1, 1e-30)[0]
    x[6] = normal(1, 1e-6)[0]
    x[7] = one_per_block(normal(1, 1e-42), [1.0, -1.0])[0]
    sets.append(("subnormals and tiny values", x))
    # Constant blocks, 32 and 256 values long.
    consts = np.float32([1, -1, 0.5, -3.25, 1e-3, 7, 65504, -65504, 1e30, -1e-40, 8, -16])
    x = np.repeat(rng.choice(consts, 2 * COLS // 32), 32).reshape(2, COLS)
    y = np.repeat(rng.choice(consts, 2 * COLS // 256), 256).reshape(2, COLS)
    sets.append(("constant blocks", np.concatenate([x, y]).astype(np.float32)))
    # Ties: integers and halves land exactly on rounding boundaries once scaled by 1/d.
    x = np.stack([
        rng.integers(-8, 9, COLS), rng.integers(-16, 17, COLS), rng.integers(-127, 128, COLS),
        rng.integers(-254, 255, COLS) / 2, rng.integers(0, 16, COLS), rng.integers(-15, 1, COLS),
        rng.integers(-31, 32, COLS) / 2,
        one_per_block(rng.integers(-7, 8, (1, COLS)).astype(np.float32), [8, -8])[0],
    ]).astype(np.float32)
    sets.append(("ties (integers and halves)", x))
    # The largest magnitude both positive and negative in one block: the first one sets the sign.
    x = normal(2)
    blocks = x.reshape(-1, 32)
    blocks[:, 3], blocks[:, 17] = 5.0, -5.0
    blocks[::2, 3], blocks[::2, 17] = -5.0, 5.0
    sets.append(("equal positive and negative extremes", x))
    x = normal(8) * np.float32(10.0) ** rng.uniform(-8, 8, (8, 1)).astype(np.float32)
    y = normal(4).reshape(-1, 32) * np.float32(10.0) ** rng.uniform(-6, 6, (4 * COLS // 32, 1)).astype(np.float32)
    sets.append(("mixed row and block scales", np.concatenate([x, y.reshape(4, COLS)]).astype(np.float32)))
    for name, x in sets:
        assert x.dtype == np.float32 and x.shape[1] == COLS and np.isfinite(x).all(), name
    return sets


class Blocks:
    """wick's and ggml's blocks of all the data sets, per type, computed once for every section."""

    def __init__(self, wick, ggml, sets):
        self.wick_io, self.ggml_io, self.sets = wick, ggml, sets
        self.x = np.concatenate([s for _, s in sets])
        self.cache = {}

    def _get(self, who, qtype):
        if (who, qtype) not in self.cache:
            io = self.wick_io if who == "wick" else self.ggml_io
            try:
                self.cache[who, qtype] = io.quantize(qtype, self.x)
            except RuntimeError as e:
                self.cache[who, qtype] = e
        b = self.cache[who, qtype]
        if isinstance(b, RuntimeError):
            raise b
        return b

    def wick(self, qtype):
        return self._get("wick", qtype)

    def ggml(self, qtype):
        return self._get("ggml", qtype) if self.ggml_io else None

    def per_set(self, *arrays):
        """(name, input, [each array's rows of that set]) for every data set."""
        row = 0
        for name, s in self.sets:
            yield name, s, [a[row:row + len(s)] for a in arrays]
            row += len(s)


# ---- 1. quantization against gguf.quants ---------------------------------------------------------


def check_quantize(tally, blocks):
    print("-- quantization against gguf.quants.quantize (bytes)")
    for qtype in QUANTIZE_TYPES:
        try:
            got = blocks.wick(qtype)
        except RuntimeError as e:
            tally.check(False, f"{name_of(qtype)}: {e}")
            continue
        try:
            ggml = blocks.ggml(qtype)
        except RuntimeError:
            ggml = None  # section 3 counts the failure
        want = ref_quantize(qtype, blocks.x)
        arrays = [got, want] + ([ggml] if ggml is not None else [])
        bad_sets, strays = [], []
        for name, s, (g, w, *c) in blocks.per_set(*arrays):
            bad = block_differences(qtype, g, w)
            if bad.size == 0:
                tally.check(True, name)
                continue
            shown = [("wick", g), ("gguf.quants", w)] + ([("ggml", c[0])] if c else [])
            # gguf.quants strays from ggml where wick does not: ggml's own quantizer is the reference.
            if c and block_differences(qtype, g, c[0]).size == 0:
                tally.check(True, name)
                strays.append(f"{name} ({bad.size} blocks)")
                print(f"  note: {name_of(qtype)} {name}: gguf.quants differs from ggml's C quantizer in {bad.size} "
                      f"blocks; wick's bytes are ggml's")
                show_blocks(qtype, s, shown, bad, name, limit=1)
                continue
            tally.check(False, f"{name_of(qtype)} quantize, {name}: {bad.size} blocks differ")
            show_blocks(qtype, s, shown, bad, name)
            bad_sets.append(f"{name} ({bad.size} blocks)")
        nblocks = got.size // GGML_QUANT_SIZES[qtype][1]
        line = f"{name_of(qtype)}: {nblocks} blocks of {len(blocks.sets)} data sets, "
        line += "bytes identical" if not bad_sets else "DIFFER in " + ", ".join(bad_sets)
        if strays:
            line += "; gguf.quants differs from ggml (wick = ggml) in " + ", ".join(strays)
        print(line)


# ---- 2. dequantization against gguf.quants -------------------------------------------------------


def compare_dequantized(tally, qtype, got, want, blocks, label, reference="gguf.quants"):
    bad = bit_differences(got, want)
    ok = tally.check(bad.size == 0,
                     f"{name_of(qtype)} dequantize, {label}: {bad.size} values differ from {reference}")
    block, size = GGML_QUANT_SIZES[qtype]
    g, w = got.reshape(-1), want.reshape(-1)
    for i in bad[:3]:
        b = int(i) // block
        print(f"  value {int(i)} of block {b} ({bytes(blocks.reshape(-1, size)[b]).hex()}): wick {g[i]!r} "
              f"({g.view(np.uint32)[i]:08x}), {reference} {w[i]!r} ({w.view(np.uint32)[i]:08x})")
    return ok


def random_blocks(rng, qtype):
    # Every field any bit pattern: f16 scales subnormal, inf and NaN too.
    block, size = GGML_QUANT_SIZES[qtype]
    return rng.integers(0, 256, (RANDOM_ROWS, COLS // block * size), dtype=np.uint8)


def as_gguf_readable(qtype, b):
    """The type and blocks gguf.quants reads as the same values: neither it nor ggml dequantizes
    Q8_1, which is Q8_0 with s = d * sum(q) added after d."""
    if qtype != T.Q8_1:
        return qtype, b
    return T.Q8_0, np.delete(b.reshape(-1, GGML_QUANT_SIZES[qtype][1]), [2, 3], axis=1).reshape(len(b), -1)


def check_dequantize(tally, wick, blocks, random):
    print("-- dequantization against gguf.quants.dequantize (f32 bits)")
    for qtype in DEQUANTIZE_TYPES + [T.Q8_1]:
        parts, ok = [], True
        for label, b in (("wick's blocks of the data sets", None), ("random bytes", random[qtype])):
            try:
                b = blocks.wick(qtype) if b is None else b
                got = wick.dequantize(qtype, len(b), COLS, b)
            except RuntimeError as e:
                ok = tally.check(False, f"{name_of(qtype)}: {e}")
                continue
            rtype, rblocks = as_gguf_readable(qtype, b)
            want = ref_dequantize(rtype, len(b), rblocks)
            ok &= compare_dequantized(tally, qtype, got, want, b, label)
            parts.append(f"{label}: {got.size} values ({int(np.isnan(want).sum())} NaN, "
                         f"{int(np.isinf(want).sum())} inf)")
        status = "dequantize bit-exact" if ok else "dequantize DIFFERS"
        if qtype == T.Q8_1:
            status += " (read as Q8_0 without s)"
        print("; ".join([f"{name_of(qtype)}: {status}"] + parts))


# ---- 3. ggml's C reference -----------------------------------------------------------------------


def check_ggml(tally, wick, blocks, random):
    print(f"-- ggml's C reference ({blocks.ggml_io.lib}: quantize_row_*_ref bytes, dequantize_row_* f32 bits)")
    for qtype in WICK_TYPES:
        parts = []
        try:
            got, want = blocks.wick(qtype), blocks.ggml(qtype)
        except RuntimeError as e:
            tally.check(False, f"{name_of(qtype)}: {e}")
            continue
        bad_sets = []
        for name, s, (g, w) in blocks.per_set(got, want):
            bad = block_differences(qtype, g, w)
            if not tally.check(bad.size == 0,
                               f"{name_of(qtype)} quantize, {name}: {bad.size} blocks differ from ggml"):
                show_blocks(qtype, s, [("wick", g), ("ggml", w)], bad, name)
                bad_sets.append(name)
        nblocks = got.size // GGML_QUANT_SIZES[qtype][1]
        parts.append(f"quantize {nblocks} blocks " + ("identical" if not bad_sets else "DIFFER"))
        if qtype in GGML_DEQUANTIZE_TYPES:
            ok = True
            for label, b in (("wick's blocks", got), ("random bytes", random[qtype])):
                try:
                    mine = wick.dequantize(qtype, len(b), COLS, b)
                    theirs = blocks.ggml_io.dequantize(qtype, len(b), COLS, b)
                except RuntimeError as e:
                    ok = tally.check(False, f"{name_of(qtype)}: {e}")
                    continue
                ok &= compare_dequantized(tally, qtype, mine, theirs, b, label, reference="ggml")
            parts.append("dequantize " + ("bit-exact" if ok else "DIFFERS") + " (wick's blocks and random bytes)")
        else:
            parts.append("no dequantize_row_q8_1 in ggml")
        print(f"{name_of(qtype)}: " + "; ".join(parts))


# ---- 4. llama-quantize ---------------------------------------------------------------------------


def llama_tensors(rng, n_layer=2, n_embd=256, n_head=4, n_head_kv=2, n_ff=768, n_vocab=512):
    """A llama model's weights as numpy (rows, cols) arrays: GGUF's dims are (cols, rows)."""
    head_dim = n_embd // n_head

    def weight(rows, cols):
        # Per-row scales as trained weights have, and a few outliers for the K-quants' searches.
        w = rng.standard_normal((rows, cols)) * 0.02 * rng.uniform(0.5, 2.0, (rows, 1))
        w.reshape(-1)[rng.integers(0, rows * cols, rows * cols // 500)] *= 8
        return w.astype(np.float32)

    def norm(n):
        return (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    t = {"token_embd.weight": weight(n_vocab, n_embd)}
    for i in range(n_layer):
        p = f"blk.{i}."
        t[p + "attn_norm.weight"] = norm(n_embd)
        t[p + "attn_q.weight"] = weight(n_head * head_dim, n_embd)
        t[p + "attn_k.weight"] = weight(n_head_kv * head_dim, n_embd)
        t[p + "attn_v.weight"] = weight(n_head_kv * head_dim, n_embd)
        t[p + "attn_output.weight"] = weight(n_embd, n_head * head_dim)
        t[p + "ffn_norm.weight"] = norm(n_embd)
        t[p + "ffn_gate.weight"] = weight(n_ff, n_embd)
        t[p + "ffn_up.weight"] = weight(n_ff, n_embd)
        t[p + "ffn_down.weight"] = weight(n_embd, n_ff)
    t["output_norm.weight"] = norm(n_embd)
    t["output.weight"] = weight(n_vocab, n_embd)
    hparams = dict(n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv, n_ff=n_ff, head_dim=head_dim)
    return t, hparams


def write_model(path, tensors, hp):
    # The keys llama.cpp's loader requires of a llama model; it needs no tokenizer to quantize.
    w = gguf.GGUFWriter(path, "llama")  # writes general.architecture
    w.add_name("wick quant-check")
    w.add_uint32("llama.context_length", 256)
    w.add_uint32("llama.embedding_length", hp["n_embd"])
    w.add_uint32("llama.block_count", hp["n_layer"])
    w.add_uint32("llama.feed_forward_length", hp["n_ff"])
    w.add_uint32("llama.attention.head_count", hp["n_head"])
    w.add_uint32("llama.attention.head_count_kv", hp["n_head_kv"])
    w.add_uint32("llama.rope.dimension_count", hp["head_dim"])
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_uint32("general.file_type", 0)  # all f32
    for name, a in tensors.items():
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def sse(values, original):
    d = (values.astype(np.float64) - original.astype(np.float64)).reshape(-1)
    return float(np.dot(d, d))


def checksum(data):
    """quant_io's checksum of a tensor's bytes: sum of b[i] * (i % 251 + 1) modulo 2^64."""
    b = np.asarray(data).reshape(-1).view(np.uint8).astype(np.uint64)
    return int((b * (np.arange(b.size, dtype=np.uint64) % np.uint64(251) + np.uint64(1))).sum(dtype=np.uint64))


def gguf_listing(reader):
    """What gguf.GGUFReader reads of a file, in quant_io gguf-list's form."""
    lines = []
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        count = len(field.data) if field.types[0] == gguf.GGUFValueType.ARRAY else 1
        lines.append(f"kv {name} {WICK_VALUE_TYPES[field.types[0]]} {count}")
    for t in reader.tensors:
        dims = ",".join(str(int(d)) for d in reversed(list(t.shape)))
        lines.append(f"tensor {t.name} {int(t.tensor_type)} {dims} {int(t.n_bytes)} {checksum(t.data)}")
    return lines


WICK_VALUE_TYPES = {gguf.GGUFValueType.UINT8: "u8", gguf.GGUFValueType.INT8: "i8", gguf.GGUFValueType.UINT16: "u16",
                    gguf.GGUFValueType.INT16: "i16", gguf.GGUFValueType.UINT32: "u32", gguf.GGUFValueType.INT32: "i32",
                    gguf.GGUFValueType.FLOAT32: "f32", gguf.GGUFValueType.BOOL: "bool",
                    gguf.GGUFValueType.STRING: "string", gguf.GGUFValueType.ARRAY: "array",
                    gguf.GGUFValueType.UINT64: "u64", gguf.GGUFValueType.INT64: "i64", gguf.GGUFValueType.FLOAT64: "f64"}


def check_gguf_files(tally, wick, path, label):
    """wick's GGUF reader against gguf.GGUFReader on one file, then the file read and written back by
    wick and read by gguf.GGUFReader: the same metadata keys, types and counts, and the same tensors,
    byte for byte."""
    theirs = gguf_listing(gguf.GGUFReader(path))
    try:
        mine = wick.gguf_list(path)
    except RuntimeError as e:
        tally.check(False, f"{label}: {e}")
        return
    tally.check(mine == theirs, f"{label}: wick reads {len(mine)} entries, gguf.GGUFReader {len(theirs)}; first difference "
                f"{next(((a, b) for a, b in zip(mine, theirs) if a != b), None)}")
    copy = path + ".wick.gguf"
    try:
        wick.gguf_copy(path, copy)
    except RuntimeError as e:
        tally.check(False, f"{label}: {e}")
        return
    again = gguf_listing(gguf.GGUFReader(copy))
    tally.check(again == theirs, f"{label}: wick's rewrite reads differently in gguf.GGUFReader; first difference "
                f"{next(((a, b) for a, b in zip(again, theirs) if a != b), None)}")


def check_llama_quantize(tally, wick, llama_quantize, scratch, rng):
    print(f"-- llama-quantize ({llama_quantize}), a 2-layer llama model of random f32 weights")
    tensors, hp = llama_tensors(rng)
    src = os.path.join(scratch, "model-f32.gguf")
    write_model(src, tensors, hp)
    check_gguf_files(tally, wick, src, "f32 file")
    wick_blocks = {}  # (tensor, type) -> wick's blocks of its f32 weights, the same in every file type
    for ftype in LLAMA_FTYPES:
        dst = os.path.join(scratch, f"model-{ftype}.gguf")
        try:
            run_tool([llama_quantize, src, dst, ftype, "2"], f"llama-quantize {ftype}")
        except RuntimeError as e:
            tally.check(False, str(e))
            continue
        check_gguf_files(tally, wick, dst, f"{ftype} file")
        # Per tensor type of this file: tensors, blocks, identical blocks, values, dequantization
        # failures, squared errors of wick's and llama-quantize's blocks.
        by_type = {}
        for t in gguf.GGUFReader(dst).tensors:
            if t.tensor_type in (T.F32, T.F16, T.BF16):
                continue
            qtype, label = t.tensor_type, f"{ftype} {t.name} ({name_of(t.tensor_type)})"
            if not tally.check(qtype in DEQUANTIZE_TYPES, f"{label}: a type this check does not read"):
                continue
            cols, rows = int(t.shape[0]), int(np.prod(t.shape[1:]))
            theirs = np.asarray(t.data).view(np.uint8).reshape(rows, -1)
            original = tensors[t.name].reshape(rows, cols)
            try:
                got = wick.dequantize(qtype, rows, cols, theirs)
                if (t.name, qtype) not in wick_blocks:
                    wick_blocks[t.name, qtype] = wick.quantize(qtype, original)
                mine = wick_blocks[t.name, qtype]
                mine_values = got if np.array_equal(mine, theirs) else wick.dequantize(qtype, rows, cols, mine)
            except RuntimeError as e:
                tally.check(False, f"{label}: {e}")
                continue
            s = by_type.setdefault(qtype, [0, 0, 0, 0, 0, 0.0, 0.0])
            deq_ok = compare_dequantized(tally, qtype, got, ref_dequantize(qtype, rows, theirs), theirs, label)
            nblocks = theirs.size // GGML_QUANT_SIZES[qtype][1]
            same = nblocks - block_differences(qtype, mine, theirs).size
            e_wick, e_llama = sse(mine_values, original), sse(got, original)
            tally.check(same == nblocks or e_wick <= e_llama * (1 + SSE_SLACK),
                        f"{label}: wick's squared error {e_wick:.9g} > llama-quantize's {e_llama:.9g}")
            for i, v in enumerate((1, nblocks, same, got.size, 0 if deq_ok else 1, e_wick, e_llama)):
                s[i] += v
        for qtype, (n, nblocks, same, nvalues, deq_bad, e_wick, e_llama) in by_type.items():
            line = (f"{ftype} -> {name_of(qtype)}: llama-quantize blocks {100.0 * same / nblocks:.4g}% identical "
                    f"({same} of {nblocks} blocks, {n} tensor{'s' if n > 1 else ''})")
            if same < nblocks:
                line += f", squared error wick {e_wick:.9g} vs llama-quantize {e_llama:.9g}"
            if deq_bad:
                line += f"; dequantize DIFFERS in {deq_bad} tensors"
            else:
                line += f"; dequantize bit-exact ({nvalues} values)"
            print(line)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--ggml-child":
        return ggml_child(*sys.argv[2:])
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("quant_io")
    p.add_argument("scratch")
    p.add_argument("--llama-quantize", help="llama-quantize to check against (skipped when not given)")
    p.add_argument("--libggml", default=ctypes.util.find_library("ggml-base"),
                   help="ggml's base library (found by the loader's name by default; 'none' skips it)")
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args()
    os.makedirs(a.scratch, exist_ok=True)
    start = time.monotonic()
    try:
        version = importlib.metadata.version("gguf")
    except importlib.metadata.PackageNotFoundError:
        version = "(version unknown)"
    print(f"gguf {version} ({os.path.dirname(gguf.__file__)}), numpy {np.__version__}")
    rng = np.random.default_rng(a.seed)
    tally, wick = Tally(), Wick(os.path.abspath(a.quant_io), a.scratch)
    ggml = Ggml(a.libggml, a.scratch) if a.libggml and a.libggml != "none" else None
    blocks = Blocks(wick, ggml, hostile_sets(rng))
    random = {qtype: random_blocks(rng, qtype) for qtype in WICK_TYPES}
    check_quantize(tally, blocks)
    check_dequantize(tally, wick, blocks, random)
    if ggml:
        check_ggml(tally, wick, blocks, random)
    else:
        print("-- ggml's C reference: libggml-base not found, skipped")
    if a.llama_quantize:
        check_llama_quantize(tally, wick, a.llama_quantize, a.scratch, rng)
    else:
        print("-- llama-quantize: not given, skipped")
    print(f"gguf check: {tally.passed} checks passed, {tally.failed} failed ({time.monotonic() - start:.1f} s)")
    return 1 if tally.failed else 0


if __name__ == "__main__":
    sys.exit(main())
