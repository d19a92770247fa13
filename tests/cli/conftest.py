"""The cli tier: gpudiag's commands in real child processes (``python -m gpudiag``), its
process handling, run directories and readers, with no TensorFlow program: every process
here starts in seconds. The test process itself imports no TensorFlow (checked)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def no_tensorflow_here() -> Iterator[None]:
    had_tf = "tensorflow" in sys.modules
    yield
    assert had_tf or "tensorflow" not in sys.modules, \
        "a cli test imports no TensorFlow: move it to tests/e2e"
