#!/usr/bin/env python3
"""wick next to PyTorch on the cases of `wick bench`, in one run.

Runs `wick bench --backend B --csv TMP` (or reads a CSV it wrote: --wick-csv), then times every
case it reported through PyTorch with the same sizes, dtypes and layouts: CUDA events on a GPU
(ROCm builds of PyTorch name their GPU "cuda" too), a steady clock on the CPU with
torch.set_num_threads(os.cpu_count()); two warm-up runs, then as many timed runs as wick made,
and the median. Both rates divide the bytes or flops wick reports by the median time, so they count the
same work. Prints one fixed-column line per case, keyed by wick's case name
(op/dtype/layout/shape):

    case  wick  torch  unit  wick/torch  wick/ceiling

A '-' marks a case with no PyTorch equivalent here. The columns and their order are stable: add
new ones at the end.

    python3 bench/compare_torch.py [--wick build-gpu/wick] [--backend cuda] [--op REGEX]
        [--dtype LIST] [--reps N] [--quick] [--wick-csv FILE] [--csv OUT] [--torch-backend B] [--no-torch]
"""
import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

CSV_COLUMNS = ["device", "driver", "revision", "backend", "op", "dtype", "shape", "layout", "median_ms", "min_ms",
               "max_ms", "reps", "bytes", "flops", "rate", "unit", "ceiling", "fraction"]
OUT_COLUMNS = ["case", "wick", "torch", "unit", "wick/torch", "wick/ceiling"]
OUT_CSV_COLUMNS = ["case", "op", "dtype", "shape", "layout", "unit", "wick_rate", "torch_rate", "wick_over_torch",
                   "wick_fraction", "wick_median_ms", "torch_median_ms", "device", "backend", "revision",
                   "torch_version"]

# wick's unary op names -> (module, function) in torch; resolved once torch is imported.
UNARY = {"exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tanh": "tanh", "abs": "abs", "neg": "neg",
         "recip": "reciprocal", "sqr": "square", "sqrt": "sqrt", "erf": "erf", "relu": "relu", "sigmoid": "sigmoid",
         "floor": "floor", "ceil": "ceil", "round": "round", "sign": "sign", "silu": "F.silu", "gelu": "F.gelu_tanh",
         "gelu_erf": "F.gelu"}
BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "maximum", "minimum": "minimum"}
CMP = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}
REDUCE = {"sum": "sum", "max": "amax", "min": "amin", "argmax": "argmax", "argmin": "argmin"}
DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64", "u8": "uint8", "i16": "int16",
          "i32": "int32", "i64": "int64", "u32": "int32"}  # torch indexes with int32/int64, not uint32
AFFINE_MUL, AFFINE_ADD = 1.5, -0.25  # what `wick bench` passes to affine


class Unsupported(Exception):
    """A case with no PyTorch equivalent in this script."""


def dims(text):
    """'8192x16384' -> [8192, 16384]"""
    if not re.fullmatch(r"\d+(x\d+)*", text):
        raise ValueError(f"bad shape '{text}'")
    return [int(d) for d in text.split("x")]


def parse_case(row):
    """The spec of one wick bench row: what to build, without touching torch."""
    op, dtype, shape, layout = row["op"], row["dtype"], row["shape"], row["layout"]
    spec = {"op": op, "layout": layout, "tf32": layout == "tf32"}
    family, _, variant = op.partition(".")
    if op in ("copy2d", "copy_strided") or family in ("unary", "binary", "cmp") or op == "affine":
        spec["dtype"], spec["shape"] = dtype, dims(shape)
        if family == "unary" and variant not in UNARY or family == "binary" and variant not in BINARY or \
                family == "cmp" and variant not in CMP:
            raise Unsupported(op)
    elif op == "cast":
        m = re.fullmatch(r"(\w+)->(\w+)", dtype)
        if not m:
            raise ValueError(f"bad cast dtype '{dtype}'")
        spec["dtype"], spec["to"], spec["shape"] = m[1], m[2], dims(shape)
    elif op == "where":
        value, _, cond = dtype.partition("/")
        spec["dtype"], spec["cond"], spec["shape"] = value, cond, dims(shape)
    elif family == "reduce":
        m = re.fullmatch(r"(\S+) over (\d+)", shape)
        if not m or variant not in REDUCE:
            raise ValueError(f"bad reduce case '{op}' '{shape}'")
        spec["dtype"], spec["shape"], spec["dim"] = dtype, dims(m[1]), int(m[2])
    elif op in ("index_select", "gather"):
        m = re.fullmatch(r"(\S+) ids (\d+)", shape)
        if not m:
            raise ValueError(f"bad index shape '{shape}'")
        spec["dtype"], spec["index"] = dtype.split("/")
        spec["shape"], spec["ids"] = dims(m[1]), int(m[2])
    elif op == "matmul":
        a, _, b = shape.partition(" @ ")
        spec["dtype"], spec["a"], spec["b"] = dtype, dims(a), dims(b)
    elif op == "conv2d":
        m = re.fullmatch(r"(\S+) \* (\S+) pad (\d+)", shape)
        if not m:
            raise ValueError(f"bad conv2d shape '{shape}'")
        spec["dtype"], spec["x"], spec["k"], spec["pad"] = dtype, dims(m[1]), dims(m[2]), int(m[3])
    elif op in ("nn.softmax", "nn.log_softmax", "nn.rms_norm", "nn.layer_norm"):
        spec["dtype"], spec["shape"] = dtype, dims(shape)
    elif op in ("nn.rope", "nn.rope_i", "nn.rope_thd"):
        spec["dtype"], spec["shape"] = dtype, dims(shape)
    elif op == "nn.attention":
        m = re.fullmatch(r"(\S+) causal", shape) or re.fullmatch(r"(\S+) kv (\S+)", shape)
        if not m:
            raise ValueError(f"bad attention shape '{shape}'")
        spec["dtype"], spec["q"] = dtype, dims(m[1])
        spec["kv"] = dims(m[2]) if m.lastindex == 2 else spec["q"]
        spec["causal"] = shape.endswith("causal")
    else:
        raise Unsupported(op)
    for key in ("dtype", "to", "cond", "index"):
        if key in spec and spec[key] not in DTYPES:
            raise Unsupported(f"dtype {spec[key]}")
    return spec


def case_name(row):
    return f"{row['op']}/{row['dtype']}/{row['layout']}/{row['shape']}"


class Torch:
    """Builds and times the torch side of a case."""

    def __init__(self, backend):
        import torch  # only here: parsing and --no-torch runs need no torch
        import torch.nn.functional as F
        self.torch, self.F = torch, F
        # wick's "cuda:1" or "rocm:1" is torch's "cuda:1" (ROCm builds of torch say "cuda" too).
        self.device = torch.device("cpu") if backend == "cpu" else \
            torch.device("cuda", int(backend.partition(":")[2] or 0))
        if self.device.type == "cpu":
            torch.set_num_threads(os.cpu_count())
        else:
            torch.cuda.set_device(self.device)
            # As wick: cuDNN times the engines of a shape once (cudnn.benchmark), keeps deterministic
            # ones, and neither products nor convolutions reduce in half precision.
            torch.backends.cudnn.benchmark = True
            torch.backends.cudnn.deterministic = True
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        self.version = torch.__version__

    def dt(self, name):
        return getattr(self.torch, DTYPES[name])

    def floats(self, dtype, shape, form="contiguous", lo=-3.0, hi=3.0):
        """Uniform in [lo, hi), laid out as wick bench lays out its inputs."""
        stored = list(shape)
        if form == "transposed":
            stored[-2], stored[-1] = stored[-1], stored[-2]
        elif form == "permuted":
            stored = stored[1:] + stored[:1]
        elif form == "broadcast0":
            stored[0] = 1
        t = self.torch.empty(stored, dtype=self.dt(dtype), device=self.device).uniform_(lo, hi)
        if form == "transposed":
            return t.transpose(-2, -1)
        if form == "permuted":
            r = len(shape)
            return t.permute(r - 1, *range(r - 1))
        if form == "broadcast0":
            return t.expand(shape)
        return t

    def build(self, spec):
        """The call to time, with its inputs made once."""
        torch, F, op = self.torch, self.F, spec["op"]
        family, _, variant = op.partition(".")
        layout = spec["layout"]
        if op in ("copy2d", "copy_strided"):
            x = self.floats(spec["dtype"], spec["shape"], "transposed" if layout == "transposed" else "contiguous")
            dst = torch.empty(spec["shape"], dtype=x.dtype, device=self.device)
            return lambda: dst.copy_(x)
        if family == "unary":
            x = self.floats(spec["dtype"], spec["shape"])
            name = UNARY[variant]
            if name == "F.gelu_tanh":
                return lambda: F.gelu(x, approximate="tanh")
            fn = getattr(F, name[2:]) if name.startswith("F.") else getattr(torch, name)
            return lambda: fn(x)
        if family in ("binary", "cmp"):
            fn = getattr(torch, BINARY[variant] if family == "binary" else CMP[variant])
            if layout == "permuted+broadcast":
                a = self.floats(spec["dtype"], spec["shape"], "permuted")
                b = self.floats(spec["dtype"], spec["shape"], "broadcast0")
            elif layout == "contiguous":
                a, b = self.floats(spec["dtype"], spec["shape"]), self.floats(spec["dtype"], spec["shape"])
            else:
                raise Unsupported(f"layout {layout}")
            return lambda: fn(a, b)
        if op == "affine":
            # One kernel, as wick's: add + alpha * x over a 0-dim tensor.
            x = self.floats(spec["dtype"], spec["shape"])
            c = torch.tensor(AFFINE_ADD, dtype=x.dtype, device=self.device)
            return lambda: torch.add(c, x, alpha=AFFINE_MUL)
        if op == "cast":
            x, to = self.floats(spec["dtype"], spec["shape"]), self.dt(spec["to"])
            return lambda: x.to(to)
        if op == "where":
            # torch takes a bool condition (one byte, as wick's u8).
            cond = torch.rand(spec["shape"], device=self.device) < 0.5
            t, f = self.floats(spec["dtype"], spec["shape"]), self.floats(spec["dtype"], spec["shape"])
            return lambda: torch.where(cond, t, f)
        if family == "reduce":
            x, dim = self.floats(spec["dtype"], spec["shape"]), spec["dim"]
            fn = getattr(torch, REDUCE[variant])
            return lambda: fn(x, dim, keepdim=True)
        if op in ("index_select", "gather"):
            rows, cols = spec["shape"]
            table = self.floats(spec["dtype"], spec["shape"])
            # torch's index ops take int32 or int64 indices; gather only int64.
            ids = torch.randint(0, rows, (spec["ids"],), device=self.device,
                                dtype=torch.int64 if op == "gather" else self.dt(spec["index"]))
            if op == "index_select":
                return lambda: torch.index_select(table, 0, ids)
            expanded = ids[:, None].expand(spec["ids"], cols)  # stride 0 over the columns, as wick's
            return lambda: torch.gather(table, 0, expanded)
        if op == "matmul":
            a = self.floats(spec["dtype"], spec["a"], lo=-1.0, hi=1.0)
            b = self.floats(spec["dtype"], spec["b"], lo=-1.0, hi=1.0)
            return lambda: torch.matmul(a, b)
        if op == "conv2d":
            x = self.floats(spec["dtype"], spec["x"], lo=-1.0, hi=1.0)
            k = self.floats(spec["dtype"], spec["k"], lo=-1.0, hi=1.0)
            return lambda: F.conv2d(x, k, padding=spec["pad"])
        if op in ("nn.softmax", "nn.log_softmax"):
            x = self.floats(spec["dtype"], spec["shape"], lo=-4.0, hi=4.0)
            fn = torch.softmax if op == "nn.softmax" else torch.log_softmax
            return lambda: fn(x, -1)
        if op in ("nn.rms_norm", "nn.layer_norm"):
            x = self.floats(spec["dtype"], spec["shape"], lo=-4.0, hi=4.0)
            d = spec["shape"][-1]
            w, b = self.floats(spec["dtype"], [d], lo=0.5, hi=1.5), self.floats(spec["dtype"], [d])
            if op == "nn.rms_norm":
                return lambda: F.rms_norm(x, (d,), w, 1e-5)
            return lambda: F.layer_norm(x, (d,), w, b, 1e-5)
        if family == "nn" and variant.startswith("rope"):
            return self.rope(spec, variant)
        if op == "nn.attention":
            return self.attention(spec)
        raise Unsupported(op)

    def rope(self, spec, variant):
        """PyTorch has no fused rotary embedding: its eager composition, as models write it."""
        torch = self.torch
        shape, thd = spec["shape"], variant == "rope_thd"
        b, h, t, d = (shape[0], shape[2], shape[1], shape[3]) if thd else shape
        if spec["layout"] == "bthd-transposed":
            x = self.floats(spec["dtype"], [b, t, h, d], lo=-4.0, hi=4.0).transpose(1, 2)
        else:
            x = self.floats(spec["dtype"], shape, lo=-4.0, hi=4.0)
        c = self.floats(spec["dtype"], [t, d // 2], lo=-1.0, hi=1.0)
        s = self.floats(spec["dtype"], [t, d // 2], lo=-1.0, hi=1.0)
        if thd:
            c, s = c[:, None, :], s[:, None, :]
        if variant == "rope_i":
            def run():
                a, bb = x[..., 0::2], x[..., 1::2]
                return torch.stack((a * c - bb * s, a * s + bb * c), -1).flatten(-2)
            return run

        def run():
            a, bb = x[..., : d // 2], x[..., d // 2:]
            return torch.cat((a * c - bb * s, a * s + bb * c), -1)
        return run

    def attention(self, spec):
        """torch's scaled_dot_product_attention; wick's composed rows against its math backend, the
        others against the fastest backend that takes the case (self.sdpa_backend says which)."""
        torch, F = self.torch, self.F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        q = self.floats(spec["dtype"], spec["q"])
        k, v = self.floats(spec["dtype"], spec["kv"]), self.floats(spec["dtype"], spec["kv"])
        gqa = spec["q"][1] != spec["kv"][1]

        def call(backend):
            def run():
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=spec["causal"], enable_gqa=gqa)
            return run
        if spec["layout"] == "composed":
            self.sdpa_backend = "math"
            return call(SDPBackend.MATH)
        best = None
        for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                        SDPBackend.MATH):
            try:
                ms = self.median_ms(call(backend), 5)
            except RuntimeError:
                continue
            if best is None or ms < best[0]:
                best = (ms, backend)
        if best is None:
            raise Unsupported("no SDPA backend takes this case")
        self.sdpa_backend = best[1].name.lower()
        return call(best[1])

    def set_tf32(self, on):
        if self.device.type == "cuda":
            self.torch.backends.cuda.matmul.allow_tf32 = on
            self.torch.backends.cudnn.allow_tf32 = on

    def median_ms(self, fn, reps):
        """wick bench's policy: two warm-up runs (the first may set up: cudnn.benchmark's search),
        then `reps` timed runs, as many as wick made."""
        torch = self.torch
        if self.device.type == "cuda":
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

            def once():
                start.record()
                fn()
                stop.record()
                stop.synchronize()
                return start.elapsed_time(stop)
        else:
            def once():
                t0 = time.perf_counter()
                fn()
                return (time.perf_counter() - t0) * 1e3
        once()
        once()
        return statistics.median(once() for _ in range(max(reps, 1)))

    def release(self):
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()
            self.torch.cuda.empty_cache()


def run_wick(args, csv_path):
    cmd = [args.wick, "bench", "--backend", args.backend, "--csv", csv_path]
    for flag, value in (("--op", args.op), ("--dtype", args.dtype), ("--reps", args.reps)):
        if value is not None:
            cmd += [flag, str(value)]
    if args.quick:
        cmd.append("--quick")
    print("#", " ".join(cmd), flush=True)
    # wick's own table goes to stderr here, so that stdout is the comparison alone.
    subprocess.run(cmd, check=True, stdout=sys.stderr)


def read_rows(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != CSV_COLUMNS:
            raise SystemExit(f"{path}: unexpected columns {reader.fieldnames}; expected {CSV_COLUMNS}")
        return list(reader)


def fmt(value, spec=".4g"):
    return "-" if value is None else format(value, spec)


def compare(rows, torch_side):
    """One result per row: (row, torch median ms or None, torch rate or None)."""
    out = []
    for row in rows:
        try:
            spec = parse_case(row)
        except Unsupported:
            out.append((row, None, None))
            continue
        if torch_side is None:
            out.append((row, None, None))
            continue
        torch_side.set_tf32(spec["tf32"])
        try:
            fn = torch_side.build(spec)
            if spec["op"] == "nn.attention":
                print(f"# torch: {case_name(row)}: sdpa backend {torch_side.sdpa_backend}", file=sys.stderr)
            ms = torch_side.median_ms(fn, int(row["reps"]))
        except Unsupported:
            out.append((row, None, None))
            continue
        except RuntimeError as e:  # a case torch refuses (an unsupported dtype on this device)
            print(f"# torch: {case_name(row)}: {e}".splitlines()[0], file=sys.stderr)
            out.append((row, None, None))
            continue
        finally:
            fn = None
            torch_side.set_tf32(False)
            torch_side.release()
        amount = float(row["flops"]) if row["unit"] == "TFLOP/s" else float(row["bytes"])
        scale = 1e12 if row["unit"] == "TFLOP/s" else 1e9
        out.append((row, ms, amount / (ms * 1e-3) / scale))
    return out


def report(results, torch_version, out_csv):
    width = max([len("case")] + [len(case_name(r)) for r, _, _ in results])
    line = f"{{:<{width}}}  {{:>11}}  {{:>11}}  {{:<8}}  {{:>10}}  {{:>12}}"
    if results:
        r0 = results[0][0]
        print(f"# wick {r0['revision']} on {r0['backend']}: {r0['device']} ({r0['driver']}); torch {torch_version}")
    print(line.format(*OUT_COLUMNS))
    table = []
    for row, ms, rate in results:
        wick_rate = float(row["rate"])
        ratio = wick_rate / rate if rate else None
        fraction = float(row["fraction"]) if row["fraction"] else None
        cells = [fmt(wick_rate), fmt(rate), row["unit"], fmt(ratio, ".3f"), fmt(fraction, ".3f")]
        print(line.format(case_name(row), *cells))
        table.append([case_name(row), row["op"], row["dtype"], row["shape"], row["layout"], row["unit"], cells[0],
                      cells[1], cells[3], cells[4], row["median_ms"], fmt(ms, ".6g"), row["device"], row["backend"],
                      row["revision"], torch_version])
    if out_csv:
        with open(out_csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(OUT_CSV_COLUMNS)
            w.writerows(table)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--wick", default="build-gpu/wick", help="the wick program (default: build-gpu/wick)")
    p.add_argument("--backend", default="cuda", help="cpu, cuda or rocm, as for wick bench (default: cuda)")
    p.add_argument("--op", help="only ops matching this regex (passed to wick bench)")
    p.add_argument("--dtype", help="only these dtypes, comma separated (passed to wick bench)")
    p.add_argument("--reps", type=int, help="timed runs per case (passed to wick bench)")
    p.add_argument("--quick", action="store_true", help="tiny sizes (passed to wick bench)")
    p.add_argument("--wick-csv", help="read this `wick bench --csv` file instead of running wick")
    p.add_argument("--csv", help="also write the comparison here")
    p.add_argument("--torch-backend", help="run torch there instead of on wick's backend (cpu, cuda, cuda:1)")
    p.add_argument("--no-torch", action="store_true", help="wick's side only (checks the parsing; torch not needed)")
    args = p.parse_args(argv)

    if args.wick_csv:
        rows = read_rows(args.wick_csv)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "wick.csv")
            run_wick(args, path)
            rows = read_rows(path)
    if args.no_torch:
        for row in rows:  # every row must parse, or be a case this script knows it cannot run
            try:
                parse_case(row)
            except Unsupported:
                pass
        torch_side, version = None, "-"
    else:
        backend = args.torch_backend or (rows[0]["backend"] if rows else args.backend)
        torch_side = Torch(backend)
        version = torch_side.version
    report(compare(rows, torch_side), version, args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
