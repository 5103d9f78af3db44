#!/usr/bin/env python3
"""torch.distributed's all_reduce (NCCL) at the sizes and in the columns of `wick bench-dist`.

Run one process per GPU:  torchrun --nproc_per_node 2 bench/dist_torch.py [--dtype bf16] [--max-bytes BYTES] [--iters N]
(--max-bytes, not bench-dist's --max: torchrun takes "--max" for an abbreviation of its own --max-restarts)
Rank 0 prints: bytes, time per call (us), algorithm bandwidth and bus bandwidth (algbw x 2(n-1)/n),
timed on the host around `iters` calls and a synchronize, as wick bench-dist times them.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--max-bytes", type=int, default=1 << 30)
    p.add_argument("--iters", type=int, default=20)
    a = p.parse_args()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    n, rank = dist.get_world_size(), dist.get_rank()
    dtype = DTYPES[a.dtype]
    es = torch.tensor([], dtype=dtype).element_size()
    sizes, b = [], 8
    while b <= a.max_bytes:  # as wick bench-dist: by 8 to 256 KiB, then every power of two from 1 MiB
        sizes.append(b)
        b *= 8 if b < (1 << 18) else 4 if b < (1 << 20) else 2
    if rank == 0:
        print(f"torch.distributed all_reduce sum of {a.dtype} over {n} ranks (NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}), "
              f"{a.iters} calls per size")
        print(f"{'bytes':>14} {'time us':>12} {'algbw GB/s':>12} {'busbw GB/s':>12}")
    for b in sizes:
        count = max(b // es, 1)
        x = torch.ones(count, dtype=dtype, device="cuda")
        for _ in range(3):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(a.iters):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        t = torch.tensor([(time.perf_counter() - start) / a.iters], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        t = t.item()
        alg = count * es / t / 1e9
        if rank == 0:
            print(f"{count * es:>14} {t * 1e6:>12.2f} {alg:>12.2f} {alg * 2 * (n - 1) / n:>12.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
