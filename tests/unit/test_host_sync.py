"""Tensors read back to Python every step of a custom loop (issue 46, item 5): the hook's
reads per line (gpudiag.inprogram.hostreads, on a plain class standing for TensorFlow's
eager tensor: no TensorFlow), and run.host-sync from plain records: the lines read every
step, their wait against the step period, named with the fix where they take the step's
time and said as not where the time went where they wait little (a CPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpudiag.inprogram import hostreads
from gpudiag.inprogram.config import RunHookConfig
from gpudiag.layout import loopevents as ev
from gpudiag.records.callsites import HostReadSite
from gpudiag.records.run import ProcessObservation, Step, StepSeries
from gpudiag.verdicts.run import hostsync


class _Agent:
    def __init__(self, events_dir: Path) -> None:
        self.config = RunHookConfig(events_dir=str(events_dir), run_dir=str(events_dir))
        self.emitted: list[ev.Event] = []
        self.errors: list[str] = []

    def emit(self, event: ev.Event) -> None:
        self.emitted.append(event)

    def hook_error(self, where: str, exc: BaseException) -> None:
        self.errors.append(f"{where}: {exc}")


LIBRARY = """
class Tensor:  # stands for _EagerTensorBase: every read goes through _numpy
    def _numpy(self):
        return 0.5

    def __float__(self):
        return float(self._numpy())

    def numpy(self):
        return self._numpy()


def read(t):  # a library's own read: not the program's line
    return float(t)
"""


def _library() -> dict[str, Any]:
    """The tensor class and a reader, compiled as a library's file (not the program's)."""
    space: dict[str, Any] = {}
    exec(compile(LIBRARY, "/usr/lib/python3/dist-packages/somelib/tensor.py", "exec"), space)
    return space


def test_each_read_is_counted_at_the_programs_line_with_how_it_was_read(
        tmp_path: Path) -> None:
    agent = _Agent(tmp_path)
    reads = hostreads.Reads(agent)  # type: ignore[arg-type]
    lib = _library()
    tensor = lib["Tensor"]
    tensor._numpy = reads.wrap(tensor._numpy)
    t = tensor()
    history = []
    for _ in range(5):
        history.append(float(t))  # the float line
        _ = t.numpy()  # the numpy line
    assert lib["read"](t) == 0.5
    reads.emit()
    (event,) = agent.emitted
    assert isinstance(event, ev.HostReads) and not agent.errors and history == [0.5] * 5
    sites = {s["how"]: s for s in event.sites}
    assert set(sites) == {"float()", ".numpy()"}  # the library's read is not counted
    assert sites["float()"]["reads"] == 5 and sites["float()"]["file"] == __file__
    assert sites["float()"]["code"] == "history.append(float(t))  # the float line"
    assert sites[".numpy()"]["reads"] == 5 and sites[".numpy()"]["median_s"] is not None


def _obs(wait_s: float, period_s: float = 0.004, steps: int = 150) -> ProcessObservation:
    rows = [Step(i, 1000.0 + i * period_s, period_s / 2, 1.0) for i in range(steps)]
    loop = StepSeries("function", "tf.function train_step", rows)
    sites = [HostReadSite("/u/train.py", 54, "history.append(float(loss_value))", "float()",
                          steps, wait_s * steps, wait_s),
             HostReadSite("/u/train.py", 70, "print(float(loss))", "float()", steps // 50,
                          0.01, 0.001)]  # every 50 steps: not a per-step read
    return ProcessObservation(pid=1, ppid=None, argv=["train.py"], start_env={},
                              series=[loop], host_reads=sites)


def test_reads_that_wait_a_large_part_of_the_step_are_named_with_the_fix() -> None:
    f = hostsync.host_sync(_obs(wait_s=0.002), warmup=5)
    assert f is not None and f.status == "warn" and f.id == "run.host-sync"
    assert "float() at train.py:54 (`history.append(float(loss_value))`): 150 reads in " \
        "150 steps" in f.message
    assert "train.py:70" not in f.message  # read every 50 steps: not a sync per step
    assert "2.00 ms a step waiting in them, 50 % of the 4.00 ms step" in f.message
    (action,) = f.actions
    assert action.where == "train.py:54" and "every N steps" in action.what
    assert "`if step % N == 0:`" in (f.advice or "")


def test_reads_that_wait_little_are_said_as_not_where_the_time_went() -> None:
    f = hostsync.host_sync(_obs(wait_s=0.00002), warmup=5)
    assert f is not None and f.status == "ok" and not f.actions
    assert "they waited little, so the loop's time is not in them" in f.message
    none = ProcessObservation(pid=1, ppid=None, argv=[], start_env={},
                              series=_obs(0.002).series)
    assert hostsync.host_sync(none, warmup=5) is None  # no line reads every step
