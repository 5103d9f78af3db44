"""Fixtures of the Python module's tests: the tiny model of the source tree, and the GPUs present."""
import os

import pytest

import wick

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def tiny_model():
    return os.path.join(ROOT, "models", "tiny.gguf")


def gpus():
    """The GPU devices wick has here ("cuda:0", ...)."""
    return [d for d in wick.available_devices() if d != "cpu"]
