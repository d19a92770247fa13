"""`gpudiag monitor`: real child commands, real report files, real signals.

NVML is absent on this machine, so the subprocess runs use the real (unavailable)
backend and must report skips. The runs with scripted GPUs give the fake backend where
the real one goes: to ``gpudiag.cli.main(argv, open_nvml=...)`` (or CliRunner's ``obj``,
the same click context object main fills) for the whole CLI, which opens and closes it,
or to ``monitor.run(backend=...)``, which only uses it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import fake_nvml
import jsonschema
import pytest
from fake_clock import FakeClock
from helpers import (
    REPO,
    assert_usage_error,
    findings_by_id,
    gpudiag,
    load_report,
    read_scalars,
    run_dirs,
)
from typer.testing import CliRunner

from gpudiag import nvml
from gpudiag.cli import app, main
from gpudiag.commands import monitor as monitor_cmd
from gpudiag.session import RunSession
from gpudiag.ui import Ui

SCHEMA = json.loads((REPO / "gpudiag" / "report.schema.json").read_text())
PY = sys.executable


def only_run(logdir: Path) -> Path:
    dirs = run_dirs(logdir)
    assert len(dirs) == 1, dirs
    return dirs[0]


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ([], "monitor needs a command"),
        (["--"], "monitor needs a command"),
        (["--", "no-such-command-gpudiag-xyz"], "command not found: no-such-command-gpudiag-xyz"),
        (["--interval", "0", "--", PY, "-c", "pass"], "--interval"),
        (["--interval", "-1", "--", PY, "-c", "pass"], "--interval"),
        (["--interval", "0.05", "--", PY, "-c", "pass"], "at least 0.1 s"),
        (["--interval", "abc", "--", PY, "-c", "pass"], "--interval"),
        (["--idle-threshold", "0", "--", PY, "-c", "pass"], "--idle-threshold"),
        (["--idle-threshold", "101", "--", PY, "-c", "pass"], "--idle-threshold"),
        (["--gpus", "abc", "--", PY, "-c", "pass"], "--gpus 'abc'"),
        (["--gpus", "0,-1", "--", PY, "-c", "pass"], "--gpus"),
        (["--no-such-option", "--", PY], "--no-such-option"),
    ],
)
def test_bad_input_one_line_exit_2_nothing_written(
    args: list[str], needle: str, logdir: Path
) -> None:
    proc = gpudiag("monitor", "--logdir", str(logdir), *args, timeout=60)
    assert_usage_error(proc, needle, logdir)


def test_clirunner_runs_monitor_with_scripted_gpus(logdir: Path) -> None:
    backend = fake_nvml.busy(n=2)
    result = CliRunner().invoke(
        app, ["monitor", "--interval", "0.1", "--logdir", str(logdir), PY, "-c", "pass"],
        obj=lambda: backend,
    )
    assert result.exit_code == 0, result.output
    found = findings_by_id(load_report(only_run(logdir)))
    assert found["monitor.command"]["status"] == "ok"
    assert found["monitor.nvml"]["status"] == "ok"
    # Both GPUs read 90 % from the first poll on (the polls stand in for driver samples
    # a short run may not have): every GPU worked, however short the run.
    used = found["monitor.every-gpu-used"]
    assert used["status"] == "ok", used["message"]
    assert used["evidence"]["worked_indices"] == [0, 1]
    assert backend.closed  # the CLI closed what it opened


def test_cli_closes_nvml_when_it_fails_at_start(logdir: Path) -> None:
    class Broken(fake_nvml.FakeBackend):
        def device_count(self) -> int:
            raise nvml.DeviceError(None, "Unknown Error")

    backend = Broken([fake_nvml.FakeDevice()])
    assert main(["monitor", "--logdir", str(logdir), "--", PY, "-c", "pass"],
                open_nvml=lambda: backend) == 0
    found = findings_by_id(load_report(only_run(logdir)))
    assert found["monitor.nvml"]["status"] == "skip"
    assert backend.closed


def test_idle_gpus_in_a_run_too_short_to_judge_warn(logdir: Path) -> None:
    # The sampler's clock never moves: the run lasted 0 s as the sampler saw it, so idle
    # GPUs cannot be told from busy ones; warn, whatever the machine's load.
    idle = fake_nvml.FakeDevice(util_percent=fake_nvml.const(0.0), pids=())
    clock = FakeClock()
    backend = fake_nvml.FakeBackend([idle, idle], clock=clock)
    rc, report, _ = _monitor(logdir, backend, "pass", clock=clock)
    assert rc is None
    used = findings_by_id(report)["monitor.every-gpu-used"]
    assert used["status"] == "warn"
    assert used["message"].startswith("the run lasted 0.0 s, too short to tell idle GPUs")
    assert used["evidence"]["idle_indices"] == [0, 1]


# --------------------------------------------------------------------------- real runs, no NVML


@pytest.mark.slow
def test_forwards_output_and_exit_code_and_reports_skips(logdir: Path) -> None:
    code = (
        "import sys; print('out from child'); print('err from child', file=sys.stderr); sys.exit(3)"
    )
    proc = gpudiag("monitor", "--logdir", str(logdir), "--", PY, "-c", code, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "out from child\n"  # stdout is the command's alone
    assert "err from child" in proc.stderr
    run_dir = only_run(logdir)
    report = load_report(run_dir)
    jsonschema.validate(report, SCHEMA)
    assert report["partial"] is False and report["interrupted"] is False
    found = findings_by_id(report)
    assert found["monitor.command"]["status"] == "fail"
    assert found["monitor.command"]["evidence"]["returncode"] == 3
    if report["environment"]["nvml_unavailable_reason"] is None:
        pytest.skip("NVML works on this machine; the no-NVML path is not exercised")
    reason = report["environment"]["nvml_unavailable_reason"]
    for check in ("monitor.nvml", "monitor.every-gpu-used"):
        assert found[check]["status"] == "skip"
        assert reason in found[check]["message"]
    assert report["summary"]["ok"] == 0  # nothing about GPUs claims a pass
    assert "SKIP" in (run_dir / "report.md").read_text()


@pytest.mark.slow
def test_json_keeps_stdout_for_the_report(logdir: Path) -> None:
    proc = gpudiag(
        "monitor",
        "--json",
        "--logdir",
        str(logdir),
        "--",
        PY,
        "-c",
        "print('child says hi')",
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)  # the child's output went to stderr
    assert "child says hi" in proc.stderr
    assert report["command"] == "monitor"
    assert report["data"]["monitor"]["returncode"] == 0
    assert report == load_report(only_run(logdir))


@pytest.mark.slow
def test_ctrl_c_stops_the_command_and_still_writes_the_report(logdir: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    child = (
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    )
    proc = subprocess.Popen(
        [PY, "-m", "gpudiag", "monitor", "--logdir", str(logdir), "--", PY, "-c", child],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()):
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.1)
        child_pid = int(pid_file.read_text())
        proc.send_signal(signal.SIGINT)  # to gpudiag only: it must pass it on
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    with pytest.raises(ProcessLookupError):
        os.kill(child_pid, 0)  # the command is gone
    report = load_report(only_run(logdir))
    jsonschema.validate(report, SCHEMA)
    assert report["interrupted"] is True and report["partial"] is True
    found = findings_by_id(report)
    assert found["monitor.command"]["status"] == "warn"
    assert found["monitor.command"]["evidence"]["returncode"] == -signal.SIGINT
    assert "monitor.every-gpu-used" in found
    assert "interrupted" in err  # gpudiag speaks on stderr under monitor


# --------------------------------------------------------------------------- scripted GPUs


def _monitor(
    logdir: Path, backend: object, code: str, *, clock: object = None,
    gpus: tuple[int, ...] | None = None,
) -> tuple[int | None, dict, Path]:
    options = monitor_cmd.MonitorOptions([PY, "-c", code], interval_s=0.1, gpus=gpus)
    with RunSession("monitor", logdir) as session:
        rc = monitor_cmd.run(session, options, backend=backend,  # type: ignore[arg-type]
                             ui=Ui.quiet(), **({} if clock is None else {"clock": clock}))
    return rc, load_report(session.run_dir), session.run_dir


@pytest.mark.slow
def test_idle_gpu_is_named_while_a_real_command_runs(logdir: Path) -> None:
    backend = fake_nvml.one_idle(n=2, idle_index=1)
    rc, report, run_dir = _monitor(logdir, backend, "import time; time.sleep(1.5)")
    assert rc is None  # exit 0: the findings decide
    jsonschema.validate(report, SCHEMA)
    found = findings_by_id(report)
    used = found["monitor.every-gpu-used"]
    assert used["status"] == "fail"
    assert "only GPU(s) 0 of 2 worked" in used["message"] and "GPU 1" in used["message"]
    assert used["evidence"]["idle_indices"] == [1]
    assert found["monitor.nvml"]["status"] == "ok"
    assert found["monitor.command"]["status"] == "ok"
    assert not backend.closed  # monitor.run uses the backend; its opener closes it
    sampling = report["data"]["monitor"]["sampling"]
    assert [s["index"] for s in sampling["summaries"]] == [0, 1]
    assert sampling["duration_s"] >= 1.5
    # per-GPU scalars in the nvml/ TensorBoard run
    scalars = read_scalars(run_dir / "nvml")
    assert {
        "gpu0/util_percent",
        "gpu1/util_percent",
        "gpu0/memory_used_mib",
        "gpu1/power_w",
    } <= set(scalars)
    assert {e.value for e in scalars["gpu1/util_percent"]} == {0.0}


@pytest.mark.slow
def test_busy_gpus_pass_and_gpus_option_restricts(logdir: Path) -> None:
    rc, report, _ = _monitor(
        logdir, fake_nvml.busy(n=3), "import time; time.sleep(1.2)", gpus=(0, 2)
    )
    found = findings_by_id(report)
    assert found["monitor.every-gpu-used"]["status"] == "ok"
    assert report["data"]["monitor"]["sampling"]["device_indices"] == [0, 2]
    assert rc is None


@pytest.mark.slow
def test_gpu_lost_mid_run_is_reported_and_the_command_finishes(logdir: Path) -> None:
    backend = fake_nvml.lost_mid_run(n=2, lost_index=1, lost_after_s=0.4)
    rc, report, _ = _monitor(logdir, backend, "import sys, time; time.sleep(1.2); sys.exit(5)")
    assert rc == 5
    found = findings_by_id(report)
    assert found["monitor.every-gpu-used"]["status"] == "fail"
    assert "GPU is lost" in found["monitor.every-gpu-used"]["message"]
    assert found["monitor.command"]["status"] == "fail"


@pytest.mark.slow
def test_monitor_runs_where_tensorflow_is_absent(tmp_path: Path) -> None:
    # A machine set up for another framework: importing tensorflow fails outright.
    code = (
        "import sys\n"
        "sys.modules['tensorflow'] = None  # any import of tensorflow now raises ImportError\n"
        "from gpudiag.cli import main\n"
        f"rc = main(['monitor', '--logdir', {str(tmp_path / 'runs')!r}, '--', {PY!r}, '-c', "
        "'print(6 * 7)'])\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run(
        [PY, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "42" in proc.stdout
    report = load_report(only_run(tmp_path / "runs"))
    assert report["partial"] is False
    assert (only_run(tmp_path / "runs") / "report").is_dir()  # TensorBoard text, TF-free


def test_nvml_failing_as_a_whole_at_start_is_a_skip(logdir: Path) -> None:
    class Broken(fake_nvml.FakeBackend):
        def device_count(self) -> int:
            raise nvml.DeviceError(None, "Unknown Error")

    backend = Broken([fake_nvml.FakeDevice()])
    rc, report, _ = _monitor(logdir, backend, "pass")
    assert rc is None
    found = findings_by_id(report)
    assert found["monitor.nvml"]["status"] == "skip"
    assert "NVML failed at start: NVML: Unknown Error" in found["monitor.nvml"]["message"]
    assert found["monitor.every-gpu-used"]["status"] == "skip"
    assert not backend.closed  # closing is for whoever opened it (the CLI: test above)
