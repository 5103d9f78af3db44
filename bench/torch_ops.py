"""PyTorch on the same cases as bench_gpu_ops, timed the same way (CUDA events, median after a
warm-up). Prints "name<TAB>ms<TAB>rate<TAB>unit" lines."""
import statistics
import sys

import torch


def median_ms(reps, f):
    f()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        f()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def report(name, ms, amount, unit):
    scale = 1e12 if unit.startswith("T") else 1e9
    print(f"{name}\t{ms:.4f}\t{amount / (ms * 1e-3) / scale:.1f}\t{unit}", flush=True)


def main():
    dev = torch.device("cuda", int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name(dev)}")
    n = 256 << 20
    x = torch.rand(n, device=dev) * 2 - 1
    y = torch.rand(n, device=dev) * 2 - 1
    dst = torch.empty_like(x)
    report("memcpy f32 256M (read+write)", median_ms(20, lambda: dst.copy_(x)), 2.0 * n * 4, "GB/s")
    report("copy f32 256M (read+write)", median_ms(20, lambda: x.clone()), 2.0 * n * 4, "GB/s")
    report("add f32 256M", median_ms(20, lambda: x + y), 3.0 * n * 4, "GB/s")
    report("cast f32->bf16 256M", median_ms(20, lambda: x.to(torch.bfloat16)), n * 6.0, "GB/s")
    m = x.reshape(8192, -1)[:, :16384].contiguous()
    report("sum f32 8192x16384 over last dim", median_ms(20, lambda: m.sum(1)), 8192.0 * 16384 * 4, "GB/s")
    report("sum f32 8192x16384 over dim 0", median_ms(20, lambda: m.sum(0)), 8192.0 * 16384 * 4, "GB/s")
    report("argmax f32 8192x16384 over last dim", median_ms(20, lambda: m.argmax(1)), 8192.0 * 16384 * 4, "GB/s")
    report("transpose f32 8192x16384 to contiguous", median_ms(20, lambda: m.t().contiguous()),
           2.0 * 8192 * 16384 * 4, "GB/s")
    del x, y, m, dst
    torch.cuda.empty_cache()
    s = 8192
    for dt, name in ((torch.bfloat16, "bf16"), (torch.float16, "f16"), (torch.float32, "f32")):
        a, c = torch.randn(s, s, device=dev, dtype=dt), torch.randn(s, s, device=dev, dtype=dt)
        report(f"matmul {name} 8192^3", median_ms(10, lambda: a @ c), 2.0 * s ** 3, "TFLOP/s")
    torch.backends.cuda.matmul.allow_tf32 = True
    a, c = torch.randn(s, s, device=dev), torch.randn(s, s, device=dev)
    report("matmul f32 (tf32) 8192^3", median_ms(10, lambda: a @ c), 2.0 * s ** 3, "TFLOP/s")
    torch.backends.cuda.matmul.allow_tf32 = False
    q = torch.randn(64, 2048, 128, device=dev, dtype=torch.bfloat16)
    k = torch.randn(64, 128, 2048, device=dev, dtype=torch.bfloat16)
    report("matmul bf16 64x(2048x128 . 128x2048)", median_ms(10, lambda: q @ k), 2.0 * 64 * 2048 * 2048 * 128,
           "TFLOP/s")
    del a, c, q, k
    torch.cuda.empty_cache()
    flops = 2.0 * 64 * 256 * 56 * 56 * 256 * 9
    for dt, name in ((torch.bfloat16, "bf16"), (torch.float32, "f32")):
        xx = torch.randn(64, 256, 56, 56, device=dev, dtype=dt)
        w = torch.randn(256, 256, 3, 3, device=dev, dtype=dt)
        conv = lambda: torch.nn.functional.conv2d(xx, w, padding=1)
        if dt == torch.float32:
            torch.backends.cudnn.allow_tf32 = False
            report("conv2d f32 64x256x56x56 3x3", median_ms(10, conv), flops, "TFLOP/s")
            torch.backends.cudnn.allow_tf32 = True
            report("conv2d f32 (tf32) 64x256x56x56 3x3", median_ms(10, conv), flops, "TFLOP/s")
        else:
            report(f"conv2d {name} 64x256x56x56 3x3", median_ms(10, conv), flops, "TFLOP/s")
    del xx, w
    torch.cuda.empty_cache()
    pool_bytes = 64.0 * 256 * 56 * 56 * 1.25
    for dt, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        xx = torch.randn(64, 256, 56, 56, device=dev, dtype=dt)
        size = xx.element_size()
        report(f"max_pool2d {name} 64x256x56x56 2x2/2",
               median_ms(20, lambda: torch.nn.functional.max_pool2d(xx, 2)), pool_bytes * size, "GB/s")
        report(f"avg_pool2d {name} 64x256x56x56 2x2/2",
               median_ms(20, lambda: torch.nn.functional.avg_pool2d(xx, 2)), pool_bytes * size, "GB/s")


if __name__ == "__main__":
    main()
