"""The unit tier: pure tests of gpudiag's functions on plain data and files in tmp_path.
Each test here starts no process and imports no TensorFlow: both are checked, so a test
that needs either belongs in tests/cli (processes) or tests/e2e (TensorFlow)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def no_process_no_tensorflow(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    had_tf = "tensorflow" in sys.modules

    def refused(self: Any, args: Any, *_: Any, **__: Any) -> None:
        raise AssertionError(f"a unit test starts no process (it started {args!r}): "
                             "move it to tests/cli or tests/e2e")

    monkeypatch.setattr(subprocess.Popen, "__init__", refused)
    yield
    assert had_tf or "tensorflow" not in sys.modules, \
        "a unit test imports no TensorFlow: move it to tests/e2e"
