"""Probes that misbehave on purpose, to test the runner against real child processes.

Run as ``python -m gpudiag.child fixture_probes.misbehave ...`` with tests/ on PYTHONPATH.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any


def run(config: dict[str, Any]) -> dict[str, Any]:
    behave = config["behave"]
    print("childprobe says hello on stderr", file=sys.stderr, flush=True)
    if behave == "ok":
        return {"echo": config.get("echo")}
    if behave == "raise":
        raise ValueError("the probe found nothing to probe\nsecond line")
    if behave == "abort":
        os.abort()
    if behave == "exit":
        os._exit(7)
    if behave == "hang":
        print("hanging now", file=sys.stderr, flush=True)
        time.sleep(3600)
    raise AssertionError(f"unknown behaviour {behave}")
