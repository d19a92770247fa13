"""``python tests/gpudiag_with_fake_nvml.py SCENARIO ARGS...``: ``python -m gpudiag ARGS`` in
its own process, with NVML replaced by a named scenario of tests/fake_nvml.py.

It calls ``gpudiag.cli.main(ARGS, open_nvml=...)``: the one seam through which an NVML
backend reaches the commands, the same one in-process tests use. The CLI opens the
scenario, passes it to the command and closes it, as it does with the real backend.
helpers.gpudiag(..., fake_nvml=SCENARIO) runs it.
"""

from __future__ import annotations

import sys

import fake_nvml

from gpudiag.cli import main

if __name__ == "__main__":
    scenario, *argv = sys.argv[1:]
    sys.exit(main(argv, open_nvml=lambda: fake_nvml.open_scenario(scenario)))
