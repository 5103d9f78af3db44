"""The Python module against NumPy: creation, ops and operators, views, errors as exceptions,
DLPack both ways with memory shared and lifetimes kept, and the model runner."""
import gc
import weakref

import numpy as np
import pytest

import wick

RNG = np.random.default_rng(7)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def test_tensor_from_numpy_and_back():
    a = rand(3, 4)
    t = wick.tensor(a)
    assert t.shape == (3, 4) and t.dtype == "f32" and t.device == "cpu" and t.ndim == 2
    np.testing.assert_array_equal(t.numpy(), a)
    assert wick.tensor([1, 2, 3]).dtype == "i64"
    assert wick.tensor([1.5, 2], dtype="bf16").to("f32").tolist() == [1.5, 2.0]
    assert wick.tensor(np.array([True, False])).dtype == "u8"


def test_ops_match_numpy():
    a, b = rand(4, 5), rand(5)
    ta, tb = wick.tensor(a), wick.tensor(b)
    np.testing.assert_allclose((ta + tb).numpy(), a + b, rtol=0, atol=0)
    np.testing.assert_allclose((ta * 2 - 1).numpy(), a * 2 - 1, rtol=0, atol=0)
    np.testing.assert_allclose((1 - ta).numpy(), 1 - a, rtol=0, atol=0)
    np.testing.assert_allclose((ta / tb).numpy(), a / b, rtol=1e-7)
    np.testing.assert_allclose(ta.exp().numpy(), np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(ta.sum(1).numpy(), a.sum(1), rtol=1e-5)
    np.testing.assert_allclose(ta.sum(keepdim=True).numpy(), a.sum(keepdims=True).reshape(1, 1), rtol=1e-5)
    np.testing.assert_allclose(ta.max([0, 1]).item(), a.max())
    np.testing.assert_array_equal((ta > 0).numpy(), (a > 0).astype(np.uint8))
    np.testing.assert_allclose((ta @ ta.t()).numpy(), a @ a.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(ta.argmax(1).numpy(), a.argmax(1).astype(np.uint32))
    s = wick.nn.softmax(ta, dim=-1).numpy()
    e = np.exp(a - a.max(-1, keepdims=True))
    np.testing.assert_allclose(s, e / e.sum(-1, keepdims=True), rtol=1e-6)
    c, w = rand(4, 5), rand(5)
    total, normed = wick.nn.add_rms_norm(ta, wick.tensor(c), wick.tensor(w), eps=1e-5)
    np.testing.assert_array_equal(total.numpy(), a + c)
    rms = np.sqrt(((a + c) ** 2).mean(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(normed.numpy(), (a + c) / rms * w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(wick.nn.silu_mul(ta, wick.tensor(c)).numpy(), a / (1 + np.exp(-a)) * c, rtol=1e-5,
                               atol=1e-6)


def test_views_share_memory():
    a = rand(4, 6)
    t = wick.tensor(a)
    np.testing.assert_array_equal(t[1].numpy(), a[1])
    np.testing.assert_array_equal(t[:, 1:5:2].numpy(), a[:, 1:5:2])
    np.testing.assert_array_equal(t[-1, 2].numpy(), a[-1, 2])
    v = t.transpose(0, 1)
    assert not v.is_contiguous() and v.data_ptr == t.data_ptr
    v.select(0, 0).fill_(5)
    assert (t.numpy()[:, 0] == 5).all()
    assert [r.shape for r in t] == [(6,)] * 4
    assert len(t) == 4


def test_errors_are_exceptions_with_wicks_message():
    with pytest.raises(wick.ShapeError, match=r"add.*\[2, 3\].*\[4\]"):
        wick.zeros([2, 3]) + wick.zeros([4])
    with pytest.raises(wick.DTypeError, match="f32.*i32"):
        wick.zeros([2]) * wick.zeros([2], dtype="i32")
    with pytest.raises(wick.DeviceError, match="cuda:1000"):
        wick.zeros([2], device="cuda:1000")
    with pytest.raises(wick.DTypeError, match="no_such"):
        wick.zeros([2], dtype="no_such")
    with pytest.raises(wick.Error):
        wick.zeros([2]).reshape([3])
    assert issubclass(wick.ShapeError, wick.Error) and issubclass(wick.Error, RuntimeError)
    with pytest.raises(IndexError):
        wick.zeros([2])[2]


def test_numpy_to_wick_is_zero_copy_and_keeps_the_array():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    alive = weakref.ref(a)
    t = wick.from_dlpack(a)
    assert t.data_ptr == a.ctypes.data
    t.fill_(2)
    assert (a == 2).all()
    del a
    gc.collect()
    assert alive() is not None, "wick holds the NumPy array while its tensor lives"
    assert t.sum().item() == 24
    del t
    gc.collect()
    assert alive() is None, "the array goes with the last wick tensor over it"


def test_strided_numpy_views():
    a = rand(6, 8)
    t = wick.from_dlpack(a[1:5, ::2])
    np.testing.assert_array_equal(t.numpy(), a[1:5, ::2])
    assert t.strides == (8, 2) and t.data_ptr == a[1:5, ::2].ctypes.data
    with pytest.raises(wick.ShapeError, match="negative stride"):
        wick.from_dlpack(a[::-1])


def test_wick_to_numpy_is_zero_copy_and_keeps_the_storage():
    t = wick.tensor(rand(5, 3))
    want = t.numpy().copy()
    view = np.from_dlpack(t.transpose(0, 1))
    assert view.ctypes.data == t.data_ptr and view.shape == (3, 5)
    del t
    gc.collect()
    np.testing.assert_array_equal(view, want.T)


def test_dlpack_capsules():
    t = wick.arange(0, 6, dtype="i32")
    assert t.__dlpack_device__() == (1, 0)
    cap = t.__dlpack__()
    u = wick.from_dlpack(cap)
    assert u.data_ptr == t.data_ptr and u.dtype == "i32"
    with pytest.raises(wick.NotSupportedError, match="consumed"):
        wick.from_dlpack(cap)
    with pytest.raises(wick.NotSupportedError, match="__dlpack__"):
        wick.from_dlpack(object())
    with pytest.raises(wick.DTypeError, match="f8e4m3"):
        wick.zeros([2], dtype="f8e4m3").__dlpack__()
    wick.ones([3]).__dlpack__()  # a capsule never consumed frees its tensor
    # The array API's keywords: a copy when asked, and only the tensor's own device.
    c = wick.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=True))
    assert c.data_ptr != t.data_ptr and c.tolist() == t.tolist()
    with pytest.raises(BufferError, match="dl_device"):
        t.__dlpack__(dl_device=(2, 0))


def test_repr_summarises_like_pytorch():
    assert repr(wick.tensor([[1, 2], [3, 4]], dtype="i32")) == "tensor([[1, 2],\n        [3, 4]], dtype=i32)"
    r = repr(wick.arange(100, 2000, dtype="f32"))
    assert r == "tensor([ 100.,  101.,  102., ..., 1997., 1998., 1999.], dtype=f32)"
    # Magnitudes over 1000x apart: scientific, as PyTorch.
    assert repr(wick.tensor([0.5, 2000.5])) == "tensor([5.0000e-01, 2.0005e+03], dtype=f64)"
    assert repr(wick.zeros([2, 0])) == "tensor([], size=[2, 0], dtype=f32)"


def test_quant_round_trip():
    w = wick.tensor(rand(8, 64))
    q = wick.quant.quantize(w, "q8_0")
    assert (q.qtype, q.rows, q.cols, q.nbytes) == ("q8_0", 8, 64, 8 * 2 * 34)
    back = wick.quant.dequantize(q).numpy()
    np.testing.assert_allclose(back, w.numpy(), atol=np.abs(w.numpy()).max() / 100)
    y = wick.quant.qmatmul(wick.tensor(rand(2, 64)), q)
    assert y.shape == (2, 8)


def test_model_generates(tiny_model):
    m = wick.Model(tiny_model)
    ids = m.encode("Hello world")
    assert len(ids) > 1 and isinstance(m.decode(ids), str)
    pieces = []
    text = m.generate("Hello world", max_tokens=6, on_token=lambda piece, token: pieces.append(piece))
    assert text == "".join(pieces) and 1 <= len(pieces) <= 6
    assert m.generate("Hello world", max_tokens=6) == text, "greedy is deterministic"
    assert m.generate("Hello world", max_tokens=6, on_token=lambda p, t: False) == pieces[0]
    with pytest.raises(wick.Error, match="nonexistent"):
        wick.Model("/nonexistent.gguf")


def test_a_model_split_over_two_ranks_answers_as_the_whole(tiny_model):
    whole = wick.Model(tiny_model)
    split = wick.Model(tiny_model, devices=["cpu", "cpu"])
    assert split.generate("Hello world", max_tokens=10) == whole.generate("Hello world", max_tokens=10)

    def engine_tokens(model):  # the engine drives a split model as any other
        e = wick.Engine(model, blocks=64)
        return [p.token for p in wick.stream(e, e.submit("Hello world", max_tokens=10, stop_at_end=False))
                if p.token >= 0]

    assert engine_tokens(split) == engine_tokens(whole)
    with pytest.raises(wick.ShapeError, match="at least 2 devices"):
        wick.Model(tiny_model, devices=["cpu"])


def test_engine_serves_requests_at_once(tiny_model):
    m = wick.Model(tiny_model)
    e = wick.Engine(m, blocks=64)
    first = e.submit("Hello world", max_tokens=8, stop_at_end=False)
    second = e.submit(ids=m.encode("GNU General Public"), max_tokens=200, stop_at_end=False)
    pieces = list(wick.stream(e, first))
    assert len(pieces) == 8 and pieces[-1].finish == "length"
    assert all(p.finish is None for p in pieces[:-1])
    text = "".join(p.text for p in pieces)
    # The text continues the prompt: joined to the prompt's, it is the whole sequence's.
    prompt = m.encode("Hello world")
    assert m.decode(prompt) + text == m.decode(prompt + [p.token for p in pieces])
    # The same greedy request alone gives the same text.
    assert "".join(p.text for p in wick.stream(e, e.submit("Hello world", max_tokens=8, stop_at_end=False))) == text
    # Log-probabilities and penalties: a greedy token is its likeliest entry.
    scored = list(wick.stream(e, e.submit("Hello world", max_tokens=4, stop_at_end=False, logprobs=2,
                                          frequency_penalty=0.5)))
    assert all(p.logprob <= 0 and len(p.top_logprobs) == 2 for p in scored if p.token >= 0)
    assert all(p.token == p.top_logprobs[0][0] or p.logprob <= p.top_logprobs[0][1] for p in scored if p.token >= 0)
    with pytest.raises(wick.Error, match="presence_penalty"):
        e.submit("x", presence_penalty=3)
    assert e.cancel(second)
    assert list(wick.stream(e, second))[-1].finish in ("cancelled", "length")
    assert e.next(second, timeout=0) is None and not e.cancel(second)
    s = e.stats()
    assert s["finished"] == 4 and s["blocks"] == 64 and s["blocks_used"] == 0
    with pytest.raises(wick.ShapeError, match="empty prompt"):
        e.submit(ids=[])
    with pytest.raises(wick.Error, match="top_p"):
        e.submit("Hello", top_p=2.0)


def test_deterministic_engine_gives_a_request_its_tokens_alone(tiny_model):
    e = wick.Engine(wick.Model(tiny_model), blocks=64, deterministic=True)
    ask = dict(max_tokens=6, temperature=0.8, seed=3, stop_at_end=False)
    pair = [e.submit("Hello world", **ask), e.submit("GNU General Public License", **ask)]
    beside = [p.token for p in wick.stream(e, pair[0])][:6]
    list(wick.stream(e, pair[1]))
    alone = [p.token for p in wick.stream(e, e.submit("Hello world", **ask))][:6]
    assert len(beside) == 6 and beside == alone


def test_engine_with_a_q8_0_cache(tiny_model):
    e = wick.Engine(wick.Model(tiny_model), blocks=64, kv_type="q8_0")
    pieces = list(wick.stream(e, e.submit("Hello world", max_tokens=5, stop_at_end=False)))
    assert len([p for p in pieces if p.token >= 0]) == 5 and pieces[-1].finish == "length"
    with pytest.raises(wick.ShapeError, match="kv_type"):
        wick.Engine(wick.Model(tiny_model), blocks=64, kv_type="q4_0")


def test_engine_streams_to_asyncio(tiny_model):
    import asyncio

    e = wick.Engine(wick.Model(tiny_model), blocks=64)

    async def collect(rid):
        return [p async for p in wick.astream(e, rid)]

    async def both():
        ids = [e.submit("Hello world", max_tokens=5, stop_at_end=False) for _ in range(2)]
        return await asyncio.gather(*(collect(i) for i in ids))

    a, b = asyncio.run(both())
    assert [p.token for p in a] == [p.token for p in b] and len(a) == 5


def test_memory_use_counts_tensors_and_the_peak():
    wick.reset_peak_memory("cpu")
    before = wick.memory_use("cpu")
    assert before["peak"] == before["in_use"]
    t = wick.ones([1 << 16], "f32", "cpu")  # 256 KiB
    held = wick.memory_use("cpu")
    assert held["in_use"] - before["in_use"] == 1 << 18
    del t
    gc.collect()
    after = wick.memory_use("cpu")
    assert after["in_use"] == before["in_use"] and after["peak"] >= before["in_use"] + (1 << 18)
