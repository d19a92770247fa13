"""A user's launcher for a 2-worker MultiWorkerMirroredStrategy job on one machine.

It picks two free loopback ports, writes each worker its TF_CONFIG and starts both copies
of mwms_worker.py beside this file, then waits for them; its exit code is the first
non-zero one of the workers. The launcher itself never imports TensorFlow.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

WORKER = Path(__file__).with_name("mwms_worker.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


workers = [f"127.0.0.1:{free_port()}" for _ in range(2)]
procs = []
for index in range(2):
    tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
    procs.append(subprocess.Popen([sys.executable, str(WORKER)],
                                  env={**os.environ, "TF_CONFIG": json.dumps(tf_config)}))
codes = [p.wait() for p in procs]
sys.exit(next((c for c in codes if c), 0))
