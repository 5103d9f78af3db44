#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the shapes of bench/attention_gpu.cpp, once per SDPA
backend (flash, efficient, cudnn): the peer figures for wick's GPU attention kernel. Timed as
wick's bench times: CUDA events around batches of back-to-back calls, the median over batches,
decoding rotated among enough KV sets to keep them out of L2.

    python3 bench/attention_torch.py [--quick]
"""
import argparse
import statistics

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = [("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
            ("cudnn", SDPBackend.CUDNN_ATTENTION)]


def time_ms(fn, batches, per_batch):
    for i in range(max(3, per_batch)):
        fn(i)
    torch.cuda.synchronize()
    times, call = [], 0
    for _ in range(batches):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(per_batch):
            fn(call)
            call += 1
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / per_batch)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    dev = torch.device("cuda")
    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__)
    n = (1 << 24) if args.quick else (1 << 28)
    x = torch.rand(n, device=dev)
    copy_ms = time_ms(lambda i: x.clone(), 10, 5)
    copy = 2 * n * 4 / (copy_ms * 1e-3) / 1e9
    print(f"copy f32: {copy:.0f} GB/s (read + write)")
    del x

    t = 512 if args.quick else 4096
    bf16, f16, f32 = torch.bfloat16, torch.float16, torch.float32
    cases = [(bf16, 4, 32, 32, t, t, 128, True), (bf16, 4, 32, 32, t, t, 128, False),
             (f16, 4, 32, 32, t, t, 128, True), (bf16, 4, 32, 32, t, t, 64, True),
             (bf16, 4, 32, 32, t, t, 256, True), (bf16, 4, 32, 8, t, t, 128, True),
             (f32, 1, 32, 32, t // 2, t // 2, 128, True)]
    for b in (1, 16):
        for t_kv in (4096, 32768):
            cases.append((bf16, b, 32, 8, 1, t_kv // 8 if args.quick else t_kv, 128, True))
    cases.append((f16, 16, 32, 8, 1, 4096 if args.quick else 32768, 128, True))
    cases.append((f32, 16, 32, 8, 1, 1024 if args.quick else 8192, 128, True))

    print(f"{'dtype':<9} {'kind':<8} {'shape':<26} {'mask':<7} {'backend':<10} {'ms':>10} {'TFLOP/s':>10} {'GB/s':>10}")
    for dtype, b, h, h_kv, t_q, t_kv, d, causal in cases:
        decode = t_q == 1
        kv_bytes = 2 * b * h_kv * t_kv * d * torch.tensor([], dtype=dtype).element_size()
        sets = max(1, min(16, int(200e6 / kv_bytes))) if decode else 1
        q = torch.rand(b, h, t_q, d, device=dev, dtype=dtype) * 2 - 1
        ks = [torch.rand(b, h_kv, t_kv, d, device=dev, dtype=dtype) * 2 - 1 for _ in range(sets)]
        vs = [torch.rand(b, h_kv, t_kv, d, device=dev, dtype=dtype) * 2 - 1 for _ in range(sets)]
        flops = 4.0 * b * h * t_q * t_kv * d * (0.5 if causal and not decode else 1.0)
        shape = f"b{b} h{h}/{h_kv} t{t_q}/{t_kv} d{d}"
        # PyTorch's causal mask is aligned top-left; a single query row sees every key either way.
        is_causal = causal and not decode
        for name, backend in BACKENDS:
            def call(i):
                return torch.nn.functional.scaled_dot_product_attention(
                    q, ks[i % sets], vs[i % sets], is_causal=is_causal, enable_gqa=h != h_kv)
            try:
                with sdpa_kernel(backend):
                    ms = time_ms(call, 20 if decode else 5, 50 if decode else 3)
            except RuntimeError as e:
                print(f"{str(dtype)[6:]:<9} {'decode' if decode else 'prefill':<8} {shape:<26} "
                      f"{'causal' if causal else 'none':<7} {name:<10} unsupported ({str(e).splitlines()[0][:60]})")
                continue
            line = (f"{str(dtype)[6:]:<9} {'decode' if decode else 'prefill':<8} {shape:<26} "
                    f"{'causal' if causal else 'none':<7} {name:<10} {ms:10.4f} {flops / (ms * 1e-3) / 1e12:10.1f} "
                    f"{kv_bytes / (ms * 1e-3) / 1e9:10.0f}")
            if decode:
                line += f"   {kv_bytes / (ms * 1e-3) / 1e9 / copy:.2f} of copy"
            print(line, flush=True)
        del q, ks, vs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
