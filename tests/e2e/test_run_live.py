"""`gpudiag run` while the program runs: NVML's scalars in TensorBoard before it ends, and
a GPU idle for the last minute while another works, told as it happens. NVML is the
fake backend (tests/fake_nvml.py); time is moved by the test (tests/fake_clock.py) where
a minute must pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import fake_nvml
import pytest
from fake_clock import FakeClock
from helpers import (
    REPO,
    TESTS_DIR,
    ended,
    findings_by_id,
    load_report,
    read_scalars,
    run_dirs,
    until,
)

from gpudiag import layout, nvml
from gpudiag.run.live import Live
from gpudiag.verdicts.run import gpu_idle as run_gpu_idle
from gpudiag.verdicts.run.gpu_idle import IDLE_WINDOW_S, IdleWatch, Poll

PY = sys.executable
WAITS_FOR_GATE = ("import pathlib, sys, time\n"
                  "gate = pathlib.Path(sys.argv[1])\n"
                  "print('waiting for the gate', flush=True)\n"
                  "while not gate.exists():\n"
                  "    time.sleep(0.02)\n"
                  "print('through the gate', flush=True)\n")


# ------------------------------------------------------------------ the idle watch, plain data


def polls(index: int, util: float, start_s: float, end_s: float, step_s: float = 0.5
          ) -> list[Poll]:
    n = round((end_s - start_s) / step_s)
    return [Poll(start_s + k * step_s, 1000.0 + start_s + k * step_s, index, util)
            for k in range(n + 1)]


def interleaved(*series: list[Poll]) -> list[Poll]:
    return sorted((p for s in series for p in s), key=lambda p: (p.t_s, p.index))


def test_a_gpu_at_zero_for_the_window_while_another_works_is_told_once_at_the_window() -> None:
    watch = IdleWatch(threshold_percent=10, window_s=60)
    told = watch.feed(interleaved(polls(0, 90, 0, 59.5), polls(1, 0, 0, 59.5)))
    assert told == []  # 59.5 s of zeros: not yet
    told = watch.feed(interleaved(polls(0, 90, 60, 80), polls(1, 0, 60, 80)))
    assert [(g.index, g.since_s, g.until_s, g.working) for g in told] == [(1, 0.0, 60.0,
                                                                           ((0, 90.0),))]
    assert watch.found[0].until_s == 80.0  # the stretch goes on, told once
    line = told[0].line(60)
    assert line.startswith("GPU 1 has shown 0 % utilization for the last 60 s (since ")
    assert line.endswith("while GPU 0 at 90 % worked (median over the last 60 s)")


def test_no_gpu_is_idle_when_none_works_or_a_poll_in_the_window_was_above_zero() -> None:
    both_idle = IdleWatch(threshold_percent=10, window_s=60)
    assert both_idle.feed(interleaved(polls(0, 0, 0, 120), polls(1, 0, 0, 120))) == []
    blip = [Poll(p.t_s, p.wall_s, p.index, 3.0 if p.t_s == 30.0 else 0.0)
            for p in polls(1, 0, 0, 89.5)]
    watch = IdleWatch(threshold_percent=10, window_s=60)
    assert watch.feed(interleaved(polls(0, 90, 0, 89.5), blip)) == []
    # 60 s of zeros after the blip: told then, the stretch starting after it
    (told,) = watch.feed(interleaved(polls(0, 90, 90, 90.5), polls(1, 0, 90, 90.5)))
    assert (told.since_s, told.until_s) == (30.5, 90.5)


def test_a_gpu_idle_again_after_working_is_told_again_and_the_finding_lists_both() -> None:
    series = interleaved(polls(0, 80, 0, 300), polls(1, 0, 0, 100), polls(1, 50, 100.5, 150),
                         polls(1, 0, 150.5, 300))
    found = run_gpu_idle.replay(series, threshold_percent=10, window_s=60)
    assert [(g.since_s, g.until_s) for g in found] == [(0.0, 100.0), (150.5, 300.0)]
    finding = run_gpu_idle.gpu_idle(found, gpus=2, observed_s=300)
    assert finding.status == "warn"
    assert finding.message.startswith("GPU 1 at 0 % for 100 s (from 0 s to 100 s into the "
                                      "run) while GPU 0 worked (median 80 %); GPU 1 at 0 % "
                                      "for 150 s")
    assert [g["index"] for g in finding.evidence["idle"]] == [1, 1]


def test_the_finding_skips_without_the_evidence_and_is_ok_when_no_gpu_was_idle() -> None:
    assert run_gpu_idle.gpu_idle([], gpus=0, observed_s=None,
                                 unavailable="no driver").status == "skip"
    one = run_gpu_idle.gpu_idle([], gpus=1, observed_s=600)
    assert one.status == "skip" and "no other GPU" in one.message
    short = run_gpu_idle.gpu_idle([], gpus=2, observed_s=12)
    assert short.status == "skip" and "sampled for 12 s" in short.message
    assert run_gpu_idle.gpu_idle([], gpus=2, observed_s=600).status == "ok"


# ------------------------------------------------------- Live, a real Sampler, a fake clock


def test_live_tells_an_idle_gpu_after_a_minute_of_the_fake_clock_and_writes_it_to_tensorboard(
        tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    clock = FakeClock(parties=2)  # the sampler's fast and slow loops
    backend = fake_nvml.one_idle(2, idle_index=1, clock=clock)
    sampler = nvml.Sampler(backend, 0.5, clock=clock, active_threshold_percent=10).start()
    said: list[str] = []
    live = Live(tmp_path / "events", tmp_path, said.append, sampler)
    (tmp_path / "events").mkdir()
    try:
        clock.advance(IDLE_WINDOW_S - 1)
        live.poll()
        assert said == []  # 59 s of zeros: not idle yet
        clock.advance(1.5)
        live.poll()
        live.flush()
        (line,) = said
        assert "gpudiag: GPU 1 has shown 0 % utilization for the last 60 s" in line
        assert "while GPU 0 at 90 % worked" in line
        assert line[:8] == time.strftime("%H:%M:%S", time.localtime(clock.time()))
        acc = EventAccumulator(str(tmp_path / layout.NVML_TB_RUN), size_guidance={"tensors": 0})
        acc.Reload()
        (text,) = acc.Tensors(layout.TAG_RUN_LIVE)
        assert text.tensor_proto.string_val[0].decode() == line
        scalars = read_scalars(tmp_path / layout.NVML_TB_RUN)
        assert {e.value for e in scalars[layout.gpu_util_tag(1)]} == {0.0}
        assert len(scalars[layout.gpu_util_tag(0)]) >= 120  # a poll every 0.5 s for 60 s
        clock.advance(30)
        live.poll()
        assert len(said) == 1  # the same stretch is told once
    finally:
        result = sampler.stop()  # as `run` ends: the sampler first, then the live thread
        state = live.stop()
    # the live file holds every sample the sampler returned: the finished run keeps it
    assert state.nvml is not None and state.nvml.holds(result)
    assert len(list((tmp_path / layout.NVML_TB_RUN).glob("events.out.tfevents.*"))) == 1
    scalars = read_scalars(tmp_path / layout.NVML_TB_RUN)
    assert len(scalars[layout.gpu_util_tag(0)]) == len(
        [s for s in result.samples if s.index == 0])
    found = run_gpu_idle.replay(run_gpu_idle.polls_of(result.samples), 10)
    assert [(g.index, g.since_s) for g in found] == [(1, 0.0)]


# ------------------------------------------------------------- a real `gpudiag run`, fake NVML


@pytest.mark.slow
def test_nvml_scalars_are_in_tensorboard_while_the_program_runs(tmp_path: Path) -> None:
    logdir, gate = tmp_path / "runs", tmp_path / "gate"
    with ended(subprocess.Popen(
        [PY, str(TESTS_DIR / "gpudiag_with_fake_nvml.py"), "busy", "run", "--logdir",
         str(logdir), "--interval", "0.2", "--", PY, "-c", WAITS_FOR_GATE, str(gate)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)) as proc:
        def nvml_scalars() -> dict[str, list] | None:  # type: ignore[type-arg]
            runs = run_dirs(logdir) if logdir.is_dir() else []
            tb = runs[0] / layout.NVML_TB_RUN if runs else None
            if tb is None or not list(tb.glob("events.out.tfevents.*")):
                return None
            found = read_scalars(tb)
            return found if len(found.get(layout.gpu_util_tag(1), [])) >= 3 else None

        found = until(nvml_scalars, "NVML's scalars in the run's nvml/ TensorBoard run")
        assert proc.poll() is None  # read while the program still waits for the gate
        for tag in (layout.gpu_util_tag(0), layout.gpu_memory_used_tag(0),
                    layout.gpu_power_tag(0), layout.gpu_util_driver_tag(0)):
            assert tag in found, sorted(found)
        assert {e.value for e in found[layout.gpu_util_tag(0)]} == {90.0}
        gate.touch()
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert out == b"waiting for the gate\nthrough the gate\n"
    (run_dir,) = run_dirs(logdir)
    # at the end: one event file, the finished run's, with every poll
    assert len(list((run_dir / layout.NVML_TB_RUN).glob("events.out.tfevents.*"))) == 1
    final = read_scalars(run_dir / layout.NVML_TB_RUN)
    assert len(final[layout.gpu_util_tag(1)]) >= len(found[layout.gpu_util_tag(1)])
    report = load_report(run_dir)
    idle = findings_by_id(report)["run.gpu-idle"]
    assert idle["status"] == "skip" and "less than the 60 s" in idle["message"]


# ------------------------------------------- the program's live file at the end of the run


def test_a_live_file_without_the_final_layout_is_written_again_keeping_its_told_lines(
        tmp_path: Path) -> None:
    """The loop seen first gets the plain tags live; at the end the loop with the most
    steps does: the file is written again, whole, with the lines told into it, and the
    live one removed. A file that holds it all is kept (tests/e2e/test_run_longjob.py)."""
    from helpers import read_scalars
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from gpudiag.run import eventfiles, tbwrite

    events_dir, pid = tmp_path / "events", 4242
    events_dir.mkdir()

    def rows(losses: list[float]) -> list[dict[str, float]]:
        return [{"i": i, "t0": 1000.0 + i, "dt": 0.01, "loss": v} for i, v in enumerate(losses)]

    (events_dir / f"{layout.RUN_EVENTS_PREFIX}{pid}{layout.RUN_EVENTS_SUFFIX}").write_text(
        "".join(json.dumps(e) + "\n" for e in [
            {"kind": "function_steps", "pid": pid, "function": "evaluate", "rows": rows([1.0] * 3)},
            {"kind": "function_steps", "pid": pid, "function": "train",
             "rows": rows([2.0, 1.5, 1.25, 1.0, float("nan"), 0.75, 0.5, 0.25])}]))
    said: list[str] = []
    live = Live(events_dir, tmp_path, said.append)
    live.poll()
    state = live.stop()
    (line,) = said
    assert "the loss of train is nan at step 4" in line
    program = state.programs[pid]
    assert program.prefixes == {"tf.function evaluate": "", "tf.function train":
                                "tf.function_train"}
    (obs,), _ = eventfiles.observe_all(events_dir)
    assert not program.holds(sorted(obs.series, key=lambda s: -len(s.steps)))
    written = tbwrite.write_program(tmp_path, obs, program)
    assert written["written"] == "end"
    tb_run = tmp_path / layout.run_tb_name(pid)
    (only,) = tb_run.glob("events.out.tfevents.*")
    assert only != program.path
    scalars = read_scalars(tb_run)
    assert [e.value for e in scalars[layout.TAG_RUN_LOSS]][:4] == [2.0, 1.5, 1.25, 1.0]
    assert len(scalars["program/tf.function_evaluate/loss"]) == 3
    acc = EventAccumulator(str(tb_run), size_guidance={"tensors": 0})
    acc.Reload()
    (text,) = acc.Tensors(layout.TAG_RUN_LIVE)
    assert text.tensor_proto.string_val[0].decode() == line


def test_the_programs_stderr_is_matched_as_it_is_written_and_counted_once(
        tmp_path: Path) -> None:
    """An hour of logging is not matched after the program ends: the live thread matches
    the saved stderr's whole lines as they come; the end reads only the rest, the last
    line without its newline too, and counts what the whole file counts."""
    from gpudiag import catalogue

    events_dir = tmp_path / "events"
    events_dir.mkdir()
    stderr = events_dir / layout.RUN_STDERR
    onednn = "I0000 00:00:1795545522.487589 6873 port.cc:153] oneDNN custom operations are on."
    own = "2026-11-24 18:00:00 INFO step 12: loss 0.25"
    live = Live(events_dir, tmp_path, [].append)
    with stderr.open("wb") as f:
        f.write(f"{own}\n{onednn}\n{own}\n".encode())
        f.flush()
        live.poll()
        scan = live.state.stderr_scan
        assert scan is not None and scan.matcher.counts == {"onednn-on": 1}
        f.write(f"{onednn}\n{onednn[:30]}".encode())  # the last line is still being written
        f.flush()
        live.poll()
        assert scan.matcher.counts == {"onednn-on": 2}
        f.write(f"{onednn[30:]}\n{own}\n{onednn}".encode())  # ends without a newline
    state = live.stop()
    assert state.stderr_scan is scan and scan.whole
    found = scan.finish().matches()
    assert [(m.entry.id, m.count) for m in found] == [("onednn-on", 4)]
    assert [(m.entry.id, m.count) for m in found] == [
        (m.entry.id, m.count) for m in catalogue.match_lines(stderr.read_text().splitlines())]


def test_a_step_functions_last_loss_read_again_at_its_end_is_written_once(
        tmp_path: Path) -> None:
    """The last call's loss comes again in a final row at the program's end: written live
    only when that step had no loss yet, as the end (which merges the rows) writes it."""
    from helpers import read_scalars

    from gpudiag.run import eventfiles, tbwrite

    events_dir, pid = tmp_path / "events", 4343
    events_dir.mkdir()
    read = [{"i": i, "t0": 1000.0 + i, "dt": 0.01, "loss": 1.0 - i / 8} for i in range(4)]
    unread = [{"i": 4, "t0": 1004.0, "dt": 0.01}]
    # the same tensor, read twice: the same value
    for name, rows, final in (("read", read, 0.625), ("unread", read + unread, 0.375)):
        d = events_dir / name
        d.mkdir()
        (d / f"{layout.RUN_EVENTS_PREFIX}{pid}{layout.RUN_EVENTS_SUFFIX}").write_text("".join(
            json.dumps(e) + "\n" for e in [
                {"kind": "function_steps", "pid": pid, "function": "step", "rows": rows},
                {"kind": "function_steps", "pid": pid, "function": "step",
                 "rows": [{"i": rows[-1]["i"], "loss": final, "final": True}]}]))
        live = Live(d, tmp_path / name, [].append)
        live.poll()
        program = live.stop().programs[pid]
        (obs,), _ = eventfiles.observe_all(d)
        assert tbwrite.write_program(tmp_path / name, obs, program)["written"] == "live"
        losses = [(e.step, e.value) for e in read_scalars(
            tmp_path / name / layout.run_tb_name(pid))[layout.TAG_RUN_LOSS]]
        assert losses == [(r["i"], r.get("loss", final)) for r in rows], name
