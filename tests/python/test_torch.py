"""DLPack with PyTorch: memory shared both ways without a copy (checked by pointer), on the CPU and
on every CUDA device present, lifetimes kept on both sides, and PyTorch's pending work ordered
before wick's through DLPack's stream argument. Skipped where torch is not installed."""
import gc

import pytest

import wick
from conftest import gpus

torch = pytest.importorskip("torch")

DEVICES = ["cpu"] + [d for d in gpus() if d.startswith("cuda") and torch.cuda.is_available()]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["f32", "bf16", "i64"])
def test_wick_to_torch_shares_memory(device, dtype):
    w = wick.arange(0, 24, dtype="i64", device=device).to(dtype).reshape([4, 6])
    t = torch.from_dlpack(w)
    assert t.data_ptr() == w.data_ptr, "torch reads wick's memory, no copy"
    assert str(t.device) == device and t.shape == (4, 6)
    assert t.to(torch.float64).sum().item() == sum(range(24))
    t[0, 0] = 100
    if device != "cpu":
        torch.cuda.synchronize()
    assert w.to("f64").sum().item() == sum(range(24)) + 100, "a write by torch is seen by wick"
    del w
    gc.collect()
    assert t.to(torch.float64).sum().item() == sum(range(24)) + 100, "torch keeps wick's storage alive"


@pytest.mark.parametrize("device", DEVICES)
def test_torch_to_wick_shares_memory(device):
    t = torch.randn(64, 33, device=device)
    w = wick.from_dlpack(t)
    assert w.data_ptr == t.data_ptr() and w.device == (device if device != "cuda" else "cuda:0")
    assert abs(w.sum().item() - t.sum().item()) <= 1e-3 * t.abs().sum().item()
    w.fill_(0.5)
    wick.synchronize(w.device)
    assert (t == 0.5).all(), "a write by wick is seen by torch"
    ref = t.clone()
    del t
    gc.collect()
    assert abs(w.sum().item() - ref.sum().item()) == 0, "wick keeps torch's tensor alive"


@pytest.mark.parametrize("device", DEVICES)
def test_strided_views_both_ways(device):
    t = torch.arange(48, device=device, dtype=torch.float32).reshape(6, 8)
    view = t[1:5, ::2].t()
    w = wick.from_dlpack(view)
    assert w.data_ptr == view.data_ptr() and w.strides == view.stride() and w.shape == tuple(view.shape)
    assert w.contiguous().to("f64").sum().item() == view.sum().item()
    back = torch.from_dlpack(w)
    assert back.data_ptr() == view.data_ptr() and back.stride() == view.stride()


@pytest.mark.skipif(len(DEVICES) < 2, reason="no CUDA device")
def test_torch_work_is_ordered_before_wicks():
    # A long chain of torch kernels on torch's stream, then wick reads the result on its own
    # stream: the stream passed to __dlpack__ makes wick's stream wait for torch's work.
    x = torch.ones(64 << 20, device="cuda:0")
    for _ in range(20):
        x = x * 1.0001 + 0.0
    want = x[:1].item()
    y = torch.ones(64 << 20, device="cuda:0")
    for _ in range(20):
        y = y * 1.0001 + 0.0
    w = wick.from_dlpack(y)
    got = w.max().item()
    assert got == want
