"""`gpudiag tensorboard` serves a real logdir on localhost, with the report text in it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO

from gpudiag.report import Finding
from gpudiag.session import RunSession

pytestmark = pytest.mark.slow


def test_tensorboard_serves_the_report_on_localhost(tmp_path: Path) -> None:
    with RunSession("env", tmp_path) as session:
        session.add(Finding("env.nvml", "skip", "no NVML here"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpudiag", "tensorboard", str(tmp_path), "--port", "0"],
        env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        url = None
        deadline = time.monotonic() + 90
        assert proc.stdout is not None
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "tensorboard exited"
            m = re.search(r"(http://localhost:\d+)/", line)
            url = m.group(1) if m else None
        assert url, "TensorBoard printed no URL"
        with urllib.request.urlopen(f"{url}/data/plugin/text/tags", timeout=30) as resp:
            tags = json.load(resp)
        assert tags == {f"{session.run_dir.name}/report": ["gpudiag/report"]}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
