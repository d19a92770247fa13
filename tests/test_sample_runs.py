"""The checked-in sample runs are valid reports, and their evidence re-derives."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from conftest import REPO

from gpudiag import layout
from gpudiag.placementlog import op_counts_by_device, parse

SCHEMA = json.loads((Path(layout.__file__).parent / "report.schema.json").read_text())
REPORTS = sorted((REPO / "sample_runs").glob("*/*/report.json"))


def test_there_are_sample_runs() -> None:
    commands = {json.loads(p.read_text())["command"] for p in REPORTS}
    assert {"env", "placement", "memory", "monitor", "scaling"} <= commands


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_sample_report_is_valid_and_complete(path: Path) -> None:
    report = json.loads(path.read_text())
    jsonschema.validate(report, SCHEMA)
    assert report["partial"] is False
    assert (path.parent / "report.md").exists()


def test_placement_sample_counts_rederive_from_its_log() -> None:
    (path,) = [p for p in REPORTS if json.loads(p.read_text())["command"] == "placement"]
    report = json.loads(path.read_text())
    log = (path.parent / "children" / "placement" / "stderr.txt").read_text()
    assert op_counts_by_device(parse(log)) == report["data"]["placement"]["op_counts_by_device"]


# The placement evidence of the sample's towers step: its step graph's assigned devices,
# rebuilt from the same code and the configuration the sample ran with (the sample predates
# result.json's op_devices), in a child process because devices are process-global.
STEP_GRAPH_DEVICES = """
import json, sys
from gpudiag.devices import setup
cfg = json.loads(open(sys.argv[1]).read())
dev = setup(int(cfg["n_devices"]))
from gpudiag.train import data as data_mod
from gpudiag.train.model import model_spec
from gpudiag.train.summaries import Instrumentation
from gpudiag.train.towers import TowerTrainer, op_devices
data = data_mod.load(None)
instr = Instrumentation(scalars=bool(cfg["scalars"]), histogram_every=int(cfg["histogram_every"]),
                        ema_decay=cfg["ema_decay"])
trainer = TowerTrainer(model_spec(cfg["model"]), data.info.input_shape, data.info.num_classes,
                       dev.compute_devices, batch_per_device=int(cfg["batch_per_device"]),
                       learning_rate=float(cfg["learning_rate"]), momentum=float(cfg["momentum"]),
                       variables_on=cfg["variables_on"], instrumentation=instr,
                       seed=int(cfg["seed"]))
it = trainer.make_iterator(data.train_dataset(trainer.global_batch, seed=int(cfg["seed"])))
print("OPS " + json.dumps(op_devices(trainer.step_graph(it))))
"""


@pytest.mark.slow
def test_scaling_sample_traces_show_every_tower_device_busy() -> None:
    """The checked-in 4-device towers trace, read again through xprof, shows all 4 busy,
    each op attributed to the device its step graph assigned it (not by its name)."""
    import os
    import subprocess
    import sys

    from gpudiag import traces

    (path,) = [p for p in REPORTS if json.loads(p.read_text())["command"] == "scaling"]
    (xplane,) = traces.find_xplanes(path.parent / "towers-4dev")
    config = path.parent / "children" / "towers-4dev" / "config.json"
    proc = subprocess.run([sys.executable, "-c", STEP_GRAPH_DEVICES, str(config)],
                          capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("OPS ")]
    placed = json.loads(line[len("OPS "):])
    devices = [f"/device:CPU:{i}" for i in range(1, 5)]
    busy = {d: s for d, s in traces.summarize(xplane, placed, devices).busy_by_device().items()
            if d in devices}
    assert sorted(busy) == devices
    assert all(seconds > 0 for seconds in busy.values()), busy
