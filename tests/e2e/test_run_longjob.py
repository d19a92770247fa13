"""`gpudiag run` on a long job: what a hung, stalled or long-running program leaves, and
what gpudiag shows while it runs. Real TensorFlow in real child processes, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import (
    REPO,
    TESTS_DIR,
    ended,
    files_holding,
    findings_by_id,
    load_report,
    run_dirs,
    until,
)

from gpudiag import layout
from gpudiag.layout import loopevents as lev
from gpudiag.run import eventfiles

PY = sys.executable
PROGRAMS = TESTS_DIR / "programs"

pytestmark = pytest.mark.slow


def start_run(logdir: Path, *command: str, options: tuple[str, ...] = ()
              ) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PY, "-m", "gpudiag", "run", "--logdir", str(logdir), *options, "--", *command],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)


def wait_for_line(proc: subprocess.Popen[str], needle: str) -> str:
    assert proc.stdout is not None
    for line in proc.stdout:
        if needle in line:
            return line
    raise AssertionError(f"gpudiag ended without printing {needle!r}")


def program_dir(logdir: Path) -> Path:
    (run_dir,) = run_dirs(logdir)
    return run_dir / layout.CHILDREN_DIR / layout.RUN_CHILD_NAME


def step_rows(events_dir: Path) -> int:
    by_pid, _ = eventfiles.read_events(events_dir)
    return sum(len(r.event.rows) for evs in by_pid.values() for r in evs
               if isinstance(r.event, lev.FunctionSteps))


def test_a_hung_program_killed_with_sigkill_keeps_every_step_it_ran(tmp_path: Path) -> None:
    logdir = tmp_path / "runs"
    proc = start_run(logdir, PY, str(PROGRAMS / "hangs_after_steps.py"), "31")
    with ended(proc):
        wait_for_line(proc, "hanging after 31 steps")
        out = program_dir(logdir)
        # no further step comes: the rows buffered after the first 10 are written anyway
        until(lambda: step_rows(out) == 31, "31 step rows written while the program hangs",
              deadline_s=10)
        (events_file,) = out.glob(f"{layout.RUN_EVENTS_PREFIX}*")
        pid = int(events_file.name[len(layout.RUN_EVENTS_PREFIX):].split(".")[0])
        os.kill(pid, signal.SIGKILL)
        proc.communicate(timeout=120)
    assert proc.returncode == 137
    report = load_report(out.parent.parent)
    assert "was killed by SIGKILL" in findings_by_id(report)["run.command"]["message"]
    (obs,), _ = eventfiles.observe_all(out)
    (series,) = obs.series
    assert len(series.steps) == 31


def dir_size(path: Path, *, besides: tuple[str, ...] = ()) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and
               p.name not in besides)


def test_an_eager_heavy_program_leaves_no_per_op_lines_and_a_small_run_dir(
        tmp_path: Path) -> None:
    logdir = tmp_path / "runs"
    proc = start_run(logdir, PY, str(PROGRAMS / "eager_loop.py"), "1000")
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode in (0, 1), out[-2000:]  # 1: a check failed (no GPU here)
    assert "final loss" in out
    (run_dir,) = run_dirs(logdir)
    saved = run_dir / layout.CHILDREN_DIR / layout.RUN_CHILD_NAME
    stderr = (saved / layout.RUN_STDERR).read_text()
    # gpudiag asked TensorFlow for no per-op log: 1000 steps of ~10 eager ops each would
    # have written ~10,000 "Executing op" lines (about 1.3 MB) before
    assert "Executing op" not in stderr and len(stderr) < 100_000
    # ~360 kB here (the steps' TensorBoard scalars ~150 B a step): ~550 B a step allowed, as
    # the 2 MB bound allowed over 3000 steps
    assert dir_size(run_dir, besides=(layout.RUN_STDOUT, layout.RUN_STDERR)) < 800_000
    placement = findings_by_id(load_report(run_dir))[
        "run.placement"]
    assert placement["status"] == "ok", placement["message"]
    ops = placement["evidence"]["ops_by_device"]
    assert ops["/device:CPU:0"] >= 5  # MatMul, Square, Mean, AssignSubVariableOp ...


def test_a_long_loops_step_rows_are_aggregated_and_still_count_every_step(
        tmp_path: Path) -> None:
    from gpudiag.inprogram.recorder import Recorder, StepBuffer
    from gpudiag.verdicts.run.throughput import loop_timing, step_times

    recorder = Recorder(str(tmp_path))
    buffer = StepBuffer(recorder.emit, "function_steps", 3600.0, 10, None,
                        aggregate_after=100, function="step")
    for i in range(5000):
        buffer.add({"i": i, "t0": 1000.0 + i, "dt": 0.001 if i % 2 else 0.003})
        if i % 50 == 49:  # a flush per "second" of 50 steps
            buffer.flush()
    buffer.flush()
    (obs,), _ = eventfiles.observe_all(tmp_path)
    (series,) = obs.series
    assert len(series.steps) == 100 + (5000 - 100) // 50  # 100 rows, then one a flush
    assert sum(s.count for s in series.steps) == 5000
    times = step_times(series, warmup=0)  # start to start: one per step but the last
    assert len(times) == 4999
    assert min(times) == max(times) == 1.0  # the rows' clock: a step a second
    timing = loop_timing(obs, series, 0)
    assert timing is not None and timing["call_s_median"] in (0.001, 0.003)
    size = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert size < 100 * 120 + 98 * 200


def test_a_stalled_input_pipeline_is_named_with_its_waiting_line_while_it_runs(
        tmp_path: Path) -> None:
    logdir, gate = tmp_path / "runs", tmp_path / "gate"
    program = PROGRAMS / "generator_waits.py"
    proc = start_run(logdir, PY, str(program), str(gate), options=("--stall-timeout", "2"))
    with ended(proc):
        line = wait_for_line(proc, "stalled: no step of tf.function step has finished")
        assert proc.poll() is None  # still running: gpudiag never stops it
        # the line the generator waits on, in the program's own file
        waits = [n for n, text in enumerate(program.read_text().splitlines(), 1)
                 if "gate.exists()" in text or "time.sleep(0.02)" in text]
        assert "input pipeline" in line
        assert any(f"generator_waits.py:{n} in batches()" in line for n in waits), line
        gate.touch()
        out, _ = proc.communicate(timeout=120)
    assert "done, loss" in out and "steps again after a stall" in out
    assert proc.returncode in (0, 1), out[-2000:]
    report = load_report(run_dirs(logdir)[0])
    stall = findings_by_id(report)["run.stall"]
    assert stall["status"] == "warn" and "generator_waits.py" in stall["message"]


def test_a_keras_fit_whose_generator_blocks_is_told_input_at_the_generators_line(
        tmp_path: Path) -> None:
    """Keras 3 fetches the next batch inside its step function: the main thread is in
    TensorFlow's runtime under `model.fit(...)`, and the line that waits is the generator's,
    on a py_func thread TensorFlow owns (tests/programs/fit_generator_waits.py)."""
    logdir, gate = tmp_path / "runs", tmp_path / "gate"
    program = PROGRAMS / "fit_generator_waits.py"
    proc = start_run(logdir, PY, str(program), str(gate), options=("--stall-timeout", "2"))
    with ended(proc):
        line = wait_for_line(proc, "stalled: no step of Model.fit has finished")
        waits = [n for n, text in enumerate(program.read_text().splitlines(), 1)
                 if "# GEN_WAIT" in text]
        fit = next(n for n, text in enumerate(program.read_text().splitlines(), 1)
                   if text.startswith("model.fit("))
        assert "the step waits for its input" in line, line
        assert "the generator of Dataset.from_generator waits at" in line, line
        assert any(f"fit_generator_waits.py:{n} in gen_examples()" in line
                   for n in waits), line
        # the fit's line only as where the step was called, never as where it waits
        assert f"(the step was called at fit_generator_waits.py:{fit}" in line, line
        assert "is in the program's code" not in line
        gate.touch()
        out, _ = proc.communicate(timeout=120)
    assert "done" in out and "steps again after a stall" in out
    report = load_report(run_dirs(logdir)[0])
    stall = findings_by_id(report)["run.stall"]
    assert stall["status"] == "warn" and "waits for its input" in stall["message"]
    # the gated one first (a loaded machine can add a later one: a step over 2 s)
    event = stall["evidence"]["stalls"][0]
    assert event["where"]["kind"] == "iterator" and event["where"]["via"] == "generator"
    assert event["where"]["waiting"]["function"] == "gen_examples"


def test_tensorboard_shows_a_running_programs_loss_and_step_time(tmp_path: Path) -> None:
    from helpers import read_scalars

    logdir, gate = tmp_path / "runs", tmp_path / "gate"
    proc = start_run(logdir, PY, str(PROGRAMS / "steps_then_waits.py"), str(gate))
    with ended(proc):
        wait_for_line(proc, "waiting after 30 steps")
        (run_dir,) = run_dirs(logdir)

        def scalars() -> dict[str, list] | None:  # type: ignore[type-arg]
            runs = list(run_dir.glob(layout.RUN_TB_PREFIX + "*"))
            if not runs or not list(runs[0].glob("events.out.tfevents.*")):
                return None
            found = read_scalars(runs[0])
            return found if len(found.get(layout.TAG_RUN_LOSS, [])) >= 20 else None

        found = until(scalars, "the program's loss in its TensorBoard run", deadline_s=30)
        assert proc.poll() is None  # read while the program still runs
        assert layout.TAG_RUN_STEP_TIME in found
        gate.touch()
        proc.communicate(timeout=120)
    # at the end: the steps in one event file (the live one; the HParams trial is apart),
    # every step once: its time is the period from its start to the next step's, so the
    # last of the 30 steps (no next start) has none
    (tb_run,) = run_dir.glob(layout.RUN_TB_PREFIX + "*")
    assert len(files_holding(tb_run, layout.TAG_RUN_STEP_TIME)) == 1
    assert [e.step for e in read_scalars(tb_run)[layout.TAG_RUN_STEP_TIME]] == list(range(29))


def test_a_nan_loss_reaches_the_terminal_while_it_runs_and_the_report(tmp_path: Path) -> None:
    logdir, gate = tmp_path / "runs", tmp_path / "gate"
    proc = start_run(logdir, PY, str(PROGRAMS / "steps_then_waits.py"), str(gate), "5")
    with ended(proc):
        line = wait_for_line(proc, "is nan at step 5")
        assert proc.poll() is None
        assert "the loss of train_step" in line and "gpudiag (pid" in line
        gate.touch()
        proc.communicate(timeout=120)
    report = load_report(run_dirs(logdir)[0])
    finite = findings_by_id(report)["run.finite-loss"]
    assert finite["status"] == "fail" and "is nan at step 5" in finite["message"]


def test_a_loss_stuck_at_ln_classes_is_told_while_the_program_runs(tmp_path: Path) -> None:
    logdir, gate = tmp_path / "runs", tmp_path / "gate"
    proc = start_run(logdir, PY, str(PROGRAMS / "stuck_then_waits.py"), str(gate))
    with ended(proc):
        line = wait_for_line(proc, "has stayed at ln 10 = 2.3026")
        assert proc.poll() is None  # told while the program still runs
        assert "the loss of tf.function train_step" in line and "gpudiag (pid" in line
        assert "the model predicts all 10 classes alike (the logits [batch, 10]" in line
        gate.touch()
        rest, _ = proc.communicate(timeout=120)
    assert rest.count("has stayed at ln 10") == 0  # once per loop
    report = load_report(run_dirs(logdir)[0])
    learning = findings_by_id(report)["run.learning"]
    assert learning["status"] == "fail" and "stuck at ln 10" in learning["message"]


# ---------------------------------------------- the finish: what was written live is kept


@pytest.mark.parametrize("golden", ["fit_tiny", "custom_loop"])
def test_the_tensorboard_file_written_live_is_the_final_one_with_every_step(
        tmp_path: Path, golden: str, request: pytest.FixtureRequest) -> None:
    """A long job's steps are not written a second time after it ends: the live file is
    kept, and it holds exactly what writing every step at the end gives (fit's step time
    needs the next step, held back across the live thread's reads)."""
    from helpers import files_holding, read_scalars

    from gpudiag.run import tbwrite

    run = request.getfixturevalue(golden).program_run(0)  # tests/golden.py
    assert run.returncode in (0, 1), run.stderr
    (proc,) = run.report["data"]["run"]["tensorflow_processes"]
    assert proc["tensorboard"]["written"] == "live"
    tb_run = run.run_dir / proc["tensorboard"]["run"]
    assert len(files_holding(tb_run, layout.TAG_RUN_STEP_TIME)) == 1  # not written again
    (obs,), _ = eventfiles.observe_all(run.run_dir / layout.CHILDREN_DIR / layout.RUN_CHILD_NAME)
    again = tbwrite.write_program(tmp_path / "again", obs)
    assert again["written"] == "end" and again["tags"] == proc["tensorboard"]["tags"]
    kept, whole = read_scalars(tb_run), read_scalars(tmp_path / "again" / again["run"])
    # the HParams trial's metrics (level lines, written at the end) are not the steps'
    kept = {t: v for t, v in kept.items() if not t.startswith(layout.BY_CONFIG + "/")}
    assert {t: [(e.step, e.value) for e in v] for t, v in kept.items()} == \
        {t: [(e.step, e.value) for e in v] for t, v in whole.items()}
    assert len(kept[layout.TAG_RUN_STEP_TIME]) >= (60 if "fit" in golden else 230)
    finish = run.report["data"]["run"]["finish"]
    assert list(finish) == ["program_exited_unix_s", "output_drained_s", "live_stopped_s",
                            "analysed_s"]
    assert 0 <= finish["output_drained_s"] <= finish["live_stopped_s"] <= finish["analysed_s"]
