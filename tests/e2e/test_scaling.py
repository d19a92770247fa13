"""`gpudiag scaling` end to end (real CLI, real children, real event files) and bad input.

No GPU here: the configurations run on virtual CPU devices; the NVML cross-check is
exercised with the scripted fake backend (tests/fake_nvml.py) through the same
Sampler and verdict the command uses.
"""

from __future__ import annotations

import json
from pathlib import Path

import fake_nvml
import numpy as np
import pytest
from fake_clock import FakeClock
from golden import GoldenRuns
from helpers import (
    breakdown_picture,
    findings_by_id,
    gpudiag,
    load_report,
    read_scalars,
    run_dirs,
)

from gpudiag import cli, layout, nvml
from gpudiag.records.devices import DeviceSetup
from gpudiag.records.training import (
    CountResult,
)
from gpudiag.scaling import judge
from gpudiag.scaling import timing as scaling_timing

FAST = ["--model", "mlp", "--warmup-steps", "3", "--profile-steps", "2",
        "--histogram-every", "5", "--allreduce-max-mb", "2"]


def events(run: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run), size_guidance={"tensors": 0, "images": 0, "scalars": 0})
    acc.Reload()
    return acc


def tensor_value(acc, tag: str):
    """The (only) value of ``tag`` in a run written by gpudiag's parent, as NumPy."""
    from tensorboard.util import tensor_util

    (event,) = acc.Tensors(tag)
    return tensor_util.make_ndarray(event.tensor_proto)


@pytest.mark.slow
def test_scaling_1_2_4_virtual_devices_end_to_end(logdir) -> None:
    proc = gpudiag("scaling", "--max-gpus", "4", "--strategy", "towers", "--steps", "30",
                   *FAST, "--json", "--logdir", str(logdir), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)  # --json: report.json on stdout, the table on stderr
    (run,) = run_dirs(logdir)
    assert load_report(run) == report
    assert report["partial"] is False and report["command"] == "scaling"
    assert report["devices"]["kind"] == "virtual-cpu"
    found = findings_by_id(report)
    for n in (1, 2, 4):
        f = found[f"scaling.devices-worked.towers-{n}dev"]
        assert f["status"] == "ok", f
        assert set(f["evidence"]["trace_busy_s"]) == {f"/device:CPU:{i}" for i in range(1, n + 1)}
        assert all(v > 0 for v in f["evidence"]["trace_busy_s"].values())
    # each configuration's steps broken down as run.bottleneck does, each replica a row;
    # with several devices, where the speed-up over towers-1dev went, part by part
    for n in (1, 2, 4):
        f = found[f"scaling.bottleneck.towers-{n}dev"]
        assert f["status"] in ("ok", "warn"), f
        assert set(f["evidence"]["devices"]) == {f"/device:CPU:{i}" for i in range(1, n + 1)}
        assert f["evidence"]["steps_from"] == "host step markers" and f["evidence"]["steps"] >= 1
        lost = f["evidence"].get("lost_speedup")
        if n == 1:
            assert lost is None and "speed-up" not in f["message"]
            continue
        base = found["scaling.bottleneck.towers-1dev"]["evidence"]["step_s"]
        assert lost["base_step_s"] == pytest.approx(base)
        assert lost["step_s"] == pytest.approx(f["evidence"]["step_s"])
        assert sum(lost["growth_s"].values()) == pytest.approx(lost["lost_s_per_step"], abs=1e-9)
        assert f"of {n}x by the trace" in f["message"] and "(towers-1dev)" in f["message"]
    _, height, _, text = breakdown_picture(run)
    bars = [d for n in (1, 2, 4) for d in
            found[f"scaling.bottleneck.towers-{n}dev"]["evidence"]["parts_s"]]
    assert len(bars) >= 7 and height > 350  # a bar per configuration and device
    assert text.index("scaling.bottleneck.towers-1dev") < text.index(
        "scaling.bottleneck.towers-4dev")
    eff = found["scaling.efficiency.towers"]
    assert eff["status"] == "warn" and "Not meaningful" in eff["message"]
    assert [e["n_devices"] for e in eff["evidence"]["per_device_count"]] == [2, 4]
    assert found["scaling.learning"]["status"] == "ok"
    assert found["scaling.nvml"]["status"] == "skip"
    allreduce = found["scaling.allreduce"]
    assert allreduce["status"] == "ok" and "host-memory numbers" in allreduce["message"]
    assert [r["size_bytes"] for r in allreduce["evidence"]["rows"]] == [1 << 20, 2 << 20]
    rows = report["data"]["scaling"]["rows"]
    assert [(r["strategy"], r["n_devices"]) for r in rows] == [("towers", 1), ("towers", 2),
                                                               ("towers", 4)]
    for r in rows:
        assert r["examples_per_s"] > 0
    assert rows[0]["speedup"] == pytest.approx(1.0)
    assert rows[2]["efficiency"] == pytest.approx(rows[2]["speedup"] / 4)
    # one TensorBoard run per configuration, with scalars, histograms, a trace, a checkpoint,
    # and the parent's figures (the report's) and HParams session
    configs = report["data"]["scaling"]["configs"]
    for r in rows:
        n = r["n_devices"]
        cfg_dir = run / f"towers-{n}dev"
        acc = events(cfg_dir)
        tags = set(acc.Tags()["tensors"])
        assert {"train/loss", "train/examples_per_s", "gradients/dense/kernel",
                "norms/gradients", "norms/ema", "eval/accuracy_ema",
                f"towers/loss_{n - 1}", "_hparams_/session_start_info"} <= tags
        assert list(cfg_dir.glob("plugins/profile/*/*.xplane.pb"))
        assert (cfg_dir / "checkpoints" / "checkpoint").exists()
        figures = {tag: [(e.step, e.value) for e in events_]
                   for tag, events_ in read_scalars(cfg_dir).items()
                   if tag.startswith(layout.BY_CONFIG + "/")}
        busy = r["trace_busy_fraction"]
        want = {layout.TAG_BY_CONFIG_EXAMPLES_PER_S: r["examples_per_s"],
                layout.TAG_BY_CONFIG_SPEEDUP: r["speedup"],
                layout.TAG_BY_CONFIG_EFFICIENCY: r["efficiency"],
                layout.TAG_BY_CONFIG_FINAL_LOSS: configs[r["name"]]["final_loss"],
                layout.TAG_BY_CONFIG_FINAL_ACCURACY: configs[r["name"]]["final_accuracy"],
                **{layout.busy_share_tag(i): busy[d]
                   for i, d in enumerate(configs[r["name"]]["devices"])}}
        assert set(figures) == set(want), figures
        for tag, value in want.items():  # a level line over the 30 steps
            assert [step for step, _ in figures[tag]] == [1, 30], tag
            assert all(got == pytest.approx(value, rel=1e-6) for _, got in figures[tag]), tag
    # the report run: the findings first, the table once, the plots, HParams, the layout
    report_tb = events(run / layout.REPORT_TB_RUN)
    report_tags = set(report_tb.Tags()["tensors"])
    assert {layout.TAG_FINDINGS, layout.TAG_REPORT, layout.TAG_SCALING_TABLE,
            layout.TAG_ALLREDUCE_TABLE, layout.TAG_SCALING_PLOT, layout.TAG_ALLREDUCE_PLOT,
            layout.TAG_BREAKDOWN_PLOT, layout.TAG_BOTTLENECK, "_hparams_/experiment",
            "custom_scalars__config__"} <= report_tags
    summary = tensor_value(report_tb, layout.TAG_FINDINGS).item().decode()
    lines = [ln for ln in summary.splitlines() if ln.startswith("- **")]
    assert len(lines) == len(report["findings"])
    assert lines[0].startswith("- **WARN** `scaling.efficiency.towers`")  # worst first
    for name in (layout.PLOT_PNG, layout.ALLREDUCE_PNG):
        assert (run / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    width, height, image = tensor_value(report_tb, layout.TAG_SCALING_PLOT)
    assert image == (run / layout.PLOT_PNG).read_bytes() and int(width) > int(height) > 0
    assert report_tb.SummaryMetadata(layout.TAG_ALLREDUCE_PLOT).plugin_data.plugin_name \
        == "images"
    # TensorBoard runs: the report, one per configuration; nothing with a step that is not
    # a step (no device-count or message-size scalars elsewhere)
    tb_runs = {p.parent.relative_to(run).as_posix() for p in run.rglob("events.out.tfevents.*")}
    assert tb_runs == {"report", "towers-1dev", "towers-2dev", "towers-4dev"}
    # the scaling table and the all-reduce table, once each, in the report run
    eps = {r["n_devices"]: r["examples_per_s"] for r in rows}
    text = tensor_value(report_tb, layout.TAG_SCALING_TABLE).item().decode()
    for n in (1, 2, 4):
        assert f"| towers | {n} | {eps[n]:,.0f} |" in text, text
    allreduce_table = tensor_value(report_tb, layout.TAG_ALLREDUCE_TABLE).item().decode()
    assert [ln.split("|")[1].strip() for ln in allreduce_table.splitlines()[2:]] == ["1", "2"]
    # one child per device count; its progress lines, read back with the parser the
    # parent follows them with, agree with the child's typed result
    assert sorted(p.name for p in (run / layout.CHILDREN_DIR).iterdir()) == [
        layout.count_child_name(n) for n in (1, 2, 4)]
    child = layout.child_path(run, layout.count_child_name(4))
    counted = CountResult.from_dict(json.loads((child / layout.RESULT_JSON).read_text())["result"])
    (outcome,) = counted.outcomes
    assert outcome.strategy == "towers" and outcome.result is not None
    last = layout.last_step((child / layout.STDOUT_TXT).read_text())
    assert last is not None and (last.step, last.total) == (30, 30)
    assert last.loss == pytest.approx(outcome.result.train.losses[-1], abs=1e-4)
    # where the time went: every child's phases, the parent's, adding up to the whole
    timing = report["data"]["scaling"]["timing"]
    assert [c["name"] for c in timing["children"]] == [layout.count_child_name(n)
                                                       for n in (1, 2, 4)]
    for c in timing["children"]:
        assert c["tf_import_s"] > 0 and c["process_start_s"] >= 0
        phases = c["strategies"]["towers"]
        assert set(phases) >= {"build_s", *scaling_timing.LOOP_PHASES}
        assert all(v >= 0 for v in phases.values()), phases
        assert phases["timed_s"] > 0 and phases["warmup_s"] > 0
        assert (c["allreduce_s"] > 0) == (c["n_devices"] == 4)  # the largest count's child
    totals = scaling_timing.phase_totals(timing)
    assert totals["total_s"] >= sum(c["wall_s"] for c in timing["children"])
    assert totals["total_s"] == pytest.approx(
        timing["parent"]["before_children_s"] + timing["parent"]["children_s"]
        + totals["verdicts_s"] + totals["tensorboard_s"], rel=0.01)
    assert sum(totals[k] for k in scaling_timing.PHASES) == pytest.approx(
        totals["total_s"], rel=0.01)  # the phases account for the whole run


@pytest.mark.slow
def test_learning_check_fails_with_learning_rate_zero(logdir) -> None:
    proc = gpudiag("scaling", "--max-gpus", "1", "--strategy", "towers", "--steps", "20",
                   "--learning-rate", "0", *FAST, "--logdir", str(logdir), timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    (run,) = run_dirs(logdir)
    found = findings_by_id(load_report(run))
    learning = found["scaling.learning"]
    assert learning["status"] == "fail"
    (row,) = learning["evidence"]["runs"]
    assert row["final_loss"] == pytest.approx(np.log(10), abs=0.15)  # the initial loss
    assert row["final_accuracy"] < 0.2
    assert "towers-1dev: loss 2.3" in learning["message"]
    # one device: no all-reduce, no efficiency to judge
    assert found["scaling.allreduce"]["status"] == "skip"
    assert found["scaling.efficiency.towers"]["status"] == "skip"


def run_main(capsys, *args: str) -> tuple[int, str]:
    code = cli.main(["scaling", *args])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("args", "message"), [
    (["--max-gpus", "0"], "--max-gpus"),
    (["--max-gpus", "-1"], "--max-gpus"),
    (["--max-gpus", "abc"], "Invalid value for '--max-gpus'"),
    (["--steps", "0"], "--steps"),
    (["--steps", "12"], "leaves no timed steps"),
    (["--strategy", "towers,horovod"], "--strategy 'horovod' is not one of"),
    (["--model", "resnet"], "--model 'resnet' is not one of"),
    (["--variables-on", "gpu"], "--variables-on 'gpu'"),
    (["--ema-decay", "1.5"], "--ema-decay must be in [0, 1)"),
    (["--data", "/nonexistent/train.npz"], "no such file"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, capsys, tmp_path) -> None:
    code, err = run_main(capsys, *args, "--logdir", str(tmp_path / "runs"))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpudiag: error: "), err
    assert message in lines[0]
    assert "Traceback" not in err
    assert not (tmp_path / "runs").exists()  # rejected before any run directory


def test_corrupt_tfrecord_is_rejected_before_any_child(capsys, tmp_path) -> None:
    bad = tmp_path / "train.tfrecord"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00garbage-that-is-not-framed")
    code, err = run_main(capsys, "--data", str(bad), "--logdir", str(tmp_path / "runs"))
    assert code == 2 and "corrupt" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_records_that_are_not_examples_fail_in_the_child_with_exit_2(logdir, tmp_path) -> None:
    import tensorflow as tf

    path = tmp_path / "strings.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in range(20):
            writer.write(f"not an example {i}".encode())
    proc = gpudiag("scaling", "--max-gpus", "1", "--strategy", "towers", "--steps", "10",
                   *FAST, "--data", str(path), "--logdir", str(logdir), timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("gpudiag: error: --data") and "tf.train.Example" in last
    assert "Traceback" not in proc.stderr
    (run_dir,) = run_dirs(logdir)  # the cause is in the report too, not only on the terminal
    report = load_report(run_dir)
    assert report["interrupted"] is False and report["partial"] is True
    assert findings_by_id(report)["scaling.error"]["message"] == last.removeprefix(
        "gpudiag: error: ")


@pytest.mark.slow
def test_a_data_set_smaller_than_one_global_batch_is_exit_2(logdir, tmp_path) -> None:
    rng = np.random.default_rng(0)
    path = tmp_path / "three.npz"
    np.savez(path, x_train=rng.integers(0, 255, (3, 28, 28), dtype=np.uint8),
             y_train=np.array([0, 1, 2]))
    proc = gpudiag("scaling", "--max-gpus", "1", "--strategy", "towers", "--steps", "10",
                   *FAST, "--data", str(path), "--logdir", str(logdir), timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (f"gpudiag: error: --data {path}: 2 training examples, fewer than one "
                    "global batch of 32; use a larger data set or a smaller --batch-per-device")
    report = load_report(run_dirs(logdir)[0])
    assert "scaling.learning" not in findings_by_id(report)  # never "every run learned"


@pytest.mark.slow
@pytest.mark.parametrize(("args", "message"), [
    (["--max-gpus", "20"], "20 devices asked for, but there is no GPU and at most 16 "
                           "virtual CPU devices are made (they share the same cores)"),
    (["--max-gpus", "20", "--virtual-gpus", "20"],
     "20 devices asked for, but there is no GPU and at most 16 virtual CPU devices are made "
     "(they share the same cores)"),
    (["--max-gpus", "4", "--virtual-gpus", "2"],
     "4 devices asked for but --virtual-gpus 2 makes 2 virtual CPU devices here (no GPU); "
     "ask for at most 2"),
])
def test_more_devices_than_can_be_made_is_exit_2(logdir, args, message) -> None:
    proc = gpudiag("scaling", *args, "--logdir", str(logdir), timeout=300)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last == f"gpudiag: error: {message}"


# ------------------------------------------------------------------ NVML cross-check


def sample(backend: fake_nvml.FakeBackend, seconds: float = 1.25) -> nvml.SamplingResult:
    """Sample a scenario made on a FakeClock(parties=2) for ``seconds`` of that clock."""
    clock = backend.clock
    assert isinstance(clock, FakeClock)
    sampler = nvml.Sampler(backend, interval_s=0.1, clock=clock).start()
    clock.advance(seconds)
    return sampler.stop()


def device_setup(kind: str, devices: list[str]) -> DeviceSetup:
    return DeviceSetup(kind=kind, host_device="/device:CPU:0", compute_devices=devices,
                       logical_devices=["/device:CPU:0", *devices])


def physical(backend: fake_nvml.FakeBackend) -> list[nvml.DeviceInfo]:
    return [backend.device_info(i) for i in range(backend.device_count())]


def test_nvml_cross_check_fails_naming_the_idle_gpu() -> None:
    backend = fake_nvml.one_idle(n=2, idle_index=1, clock=FakeClock(parties=2))
    setup = device_setup("gpu", ["/device:GPU:0", "/device:GPU:1"])
    finding = judge.nvml_finding("towers-2dev", sample(backend), setup, None, physical(backend))
    assert finding is not None
    assert finding.id == "scaling.nvml.towers-2dev"
    assert finding.status == "fail"
    assert "GPU 1" in finding.message and "idle" in finding.message
    assert finding.evidence["idle_indices"] == [1]
    assert finding.evidence["expected_indices"] == [0, 1]


def test_nvml_cross_check_ok_when_busy_and_absent_without_nvml() -> None:
    backend = fake_nvml.busy(n=2, clock=FakeClock(parties=2))
    setup = device_setup("gpu", ["/device:GPU:0", "/device:GPU:1"])
    sampling = sample(backend)
    finding = judge.nvml_finding("towers-2dev", sampling, setup, None, physical(backend))
    assert finding is not None and finding.status == "ok"
    assert judge.nvml_finding("towers-2dev", sampling, setup, fake_nvml.NO_NVML_REASON,
                              []) is None


def test_virtual_gpus_are_expected_on_one_physical_gpu() -> None:
    backend = fake_nvml.one_idle(n=2, idle_index=1, clock=FakeClock(parties=2))
    setup = device_setup("virtual-gpu", ["/device:GPU:0", "/device:GPU:1"])
    assert judge.expected_nvml_indices(setup, physical(backend)) == [0]
    finding = judge.nvml_finding("towers-2dev", sample(backend), setup, None, physical(backend))
    assert finding is not None and finding.status == "ok"  # GPU 1 was not asked for
    cpu = device_setup("virtual-cpu", ["/device:CPU:1"])
    assert judge.expected_nvml_indices(cpu, []) is None


@pytest.mark.slow
def test_ctrl_c_leaves_a_partial_report_with_the_finished_configurations(logdir) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from helpers import REPO

    proc = subprocess.Popen(
        [sys.executable, "-m", "gpudiag", "scaling", "--max-gpus", "2", "--strategy", "towers",
         "--steps", "400", *FAST, "--logdir", str(logdir)],
        env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            runs = run_dirs(logdir)
            out = (layout.child_path(runs[0], layout.count_child_name(2)) / layout.STDOUT_TXT
                   if runs else None)
            if out is not None and out.exists() and layout.STEP_MARKER in out.read_text():
                break  # towers-1dev is done, towers-2dev is training
            time.sleep(0.2)
        else:
            pytest.fail("the second configuration never started training")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    (run,) = run_dirs(logdir)
    report = load_report(run)
    assert report["partial"] is True and report["interrupted"] is True
    found = findings_by_id(report)
    assert found["scaling.devices-worked.towers-1dev"]["status"] == "ok"
    assert "scaling.devices-worked.towers-2dev" not in found
    assert found["scaling.learning"]["evidence"]["runs"][0]["name"] == "towers-1dev"
    leftover = subprocess.run(["pgrep", "-f", str(run)], capture_output=True, text=True)
    assert leftover.stdout.strip() == ""  # the killed child did not outlive gpudiag


@pytest.mark.slow
def test_two_virtual_cpu_devices_are_said_to_be_theirs_not_the_users_gpus(
        scaling_two: GoldenRuns) -> None:
    """Issue 37: on virtual CPU devices sharing this machine's cores, the demo's headline and
    a red card said "communication-bound" with all-reduce advice. Whatever the breakdown
    shows here, each configuration says first what its devices are, is ok, and gives no
    all-reduce or communication fix; the short verdict says the same."""
    from gpudiag.rundir import load_run
    from gpudiag.tbplugin import views
    from gpudiag.verdicts import headline
    from gpudiag.verdicts.scaling_bottleneck import SHARED_CORES_ADVICE

    proc = scaling_two.printed[0]  # tests/golden.py: scaling --max-gpus 2, mirrored
    (run,) = scaling_two.run_dirs
    report = load_report(run)
    assert report["devices"]["kind"] == "virtual-cpu"
    found = findings_by_id(report)
    for n in (1, 2):
        f = found[f"scaling.bottleneck.mirrored-{n}dev"]
        assert f["status"] == "ok", f
        assert f["message"].startswith(
            f"mirrored-{n}dev on {n} virtual CPU device{'s' if n > 1 else ''} sharing this "
            "machine's cores: the numbers describe those devices, not a property of your GPUs")
        assert f["advice"] == SHARED_CORES_ADVICE and f["evidence"]["shared_cores"] is True
    for f in report["findings"]:
        if f["id"] != "scaling.allreduce":
            assert "fewer, larger all-reduces" not in (f.get("advice") or ""), f
    eff = found["scaling.efficiency.mirrored"]
    assert eff["status"] == "warn" and "not a property of your GPUs" in eff["message"]
    line = headline.bottleneck_line(report) or ""
    assert line.endswith("of virtual CPUs sharing cores: not your GPUs"), line
    assert line in proc.stdout + proc.stderr
    # on the dashboard, a device is "used" only with busy time measured
    for lane in views.devices(load_run(run))["lanes"]:
        if lane["state"] == "used":
            assert (lane["busy_share"] or 0) >= views.USED_MIN_SHARE, lane
