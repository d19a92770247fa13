"""What the hooks load into the user's program, in a fresh interpreter: only the modules of
gpudiag.inprogram and those listed in gpudiag.inprogram.SHARED_MODULES, and nothing heavy
(the program's own import of TensorFlow must be the first)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import REPO

from gpudiag.inprogram import SHARED_MODULES

HEAVY = ("tensorflow", "keras", "tf_keras", "numpy", "xprof", "tensorboard", "rich", "typer",
         "pynvml", "matplotlib", "google")

PROBE = """
import json, pkgutil, importlib, sys
import gpudiag.inprogram as ip
for m in pkgutil.walk_packages(ip.__path__, 'gpudiag.inprogram.'):
    if not m.name.endswith('.hooks.sitecustomize'):
        importlib.import_module(m.name)
print(json.dumps(sorted(sys.modules)))
"""


def loaded_modules() -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env=env, check=True, timeout=60)
    return json.loads(out.stdout)


def test_the_hooks_load_only_the_listed_gpudiag_modules_and_nothing_heavy() -> None:
    loaded = loaded_modules()
    outside = sorted(m for m in loaded if (m == "gpudiag" or m.startswith("gpudiag."))
                     and not m.startswith("gpudiag.inprogram"))
    assert outside == sorted(SHARED_MODULES)
    assert [m for m in loaded if m.split(".")[0] in HEAVY] == []
