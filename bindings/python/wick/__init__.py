"""wick: tensors on CPU, CUDA and ROCm with the same ops and answers.

    import wick
    x = wick.tensor([[1.0, 2.0], [3.0, 4.0]], dtype="f32", device="cpu")
    y = wick.nn.softmax(x @ x.t(), dim=-1)
    torch_view = torch.from_dlpack(y)      # the same memory, no copy
    back = wick.from_dlpack(torch_view)    # and back

Dtypes and devices are strings ("f32", "bf16", "cuda:0"). Errors are wick.Error and its
subclasses (ShapeError, DTypeError, DeviceError, ...), carrying wick's message. docs/api.md lists
the names beside their C++ and C counterparts.
"""
from ._wick import *  # noqa: F401,F403
from ._wick import (Error, ShapeError, DTypeError, DeviceError, IndexError, OutOfMemoryError,  # noqa: F401
                    NotSupportedError, FormatError, DistError, Tensor, Model, Engine, Piece, nn, quant,
                    version)

__version__ = version()


def stream(engine, request):
    """The pieces of `request` (an id from engine.submit) as they come, to its last."""
    while True:
        piece = engine.next(request)
        if piece is None:
            return
        yield piece
        if piece.finish is not None:
            return


async def astream(engine, request):
    """stream() for asyncio: each wait runs in a thread (asyncio.to_thread), so the loop goes on."""
    import asyncio
    while True:
        piece = await asyncio.to_thread(engine.next, request)
        if piece is None:
            return
        yield piece
        if piece.finish is not None:
            return
