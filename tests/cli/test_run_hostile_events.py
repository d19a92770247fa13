"""One bad events line costs that line, never `gpudiag run`'s report (issue 36, item 1).

Real `gpudiag run` processes whose program writes the hostile lines into its own events
file (children/program/events-<pid>.jsonl, found through the GPUDIAG_RUN_CONFIG the
hooks read): a line nested deeper than Python's JSON reader goes (RecursionError), one
nested deeper than the protocol allows, known kinds whose inner fields have the wrong
type (the strategy's worker devices as dicts, a function's graphs as numbers, a session
group's fetches as numbers), and a line of a newer protocol version. gpudiag finishes its
report, names the unreadable lines once, says the newer version once, and exits with
the program's exit code. An error of gpudiag's own final analysis (injected: no line
reaches one now) is a run.analysis finding, never a traceback. docs/reliability.md
counts these cases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, findings_by_id, load_report, run_dirs

from gpudiag import layout

#: The program: its own events file gets the hostile lines among the hooks' own.
HOSTILE = """
import json, os, sys
config = json.loads(os.environ["GPUDIAG_RUN_CONFIG"])
path = os.path.join(config["events_dir"], "events-%d.jsonl" % os.getpid())
pid = os.getpid()
deep = 1
for _ in range(40):
    deep = [deep]
lines = [
    '{"kind": "strategy", "pid": %d, "x": ' % pid + "[" * 100000 + "]" * 100000 + "}",
    json.dumps({"kind": "fit_epoch", "v": 1, "pid": pid, "seq": 900, "logs": {"x": deep}}),
    json.dumps({"kind": "strategy", "v": 1, "pid": pid, "seq": 901, "class": "Mirrored",
                "worker_devices": [{"name": "/gpu:0"}]}),
    json.dumps({"kind": "function", "v": 1, "pid": pid, "seq": 902, "function": "step",
                "graphs": [1]}),
    json.dumps({"kind": "session_steps", "v": 1, "pid": pid, "seq": 903, "group": 0,
                "fetches": [1], "rows": [{"i": 0, "dt": 0.1}]}),
    json.dumps({"kind": "stall", "v": 7, "pid": pid, "seq": 904, "waited_s": 3}),
    json.dumps({"kind": "stall", "v": 7, "pid": pid, "seq": 905, "waited_s": 4}),
]
with open(path, "a") as f:
    for line in lines:
        f.write(line + "\\n")
print("wrote", len(lines), flush=True)
sys.exit(int(sys.argv[1]))
"""


def _run(tmp_path: Path, code: int, *, entry: list[str] | None = None
         ) -> tuple[subprocess.CompletedProcess[str], dict]:  # type: ignore[type-arg]
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE)
    logdir = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, *(entry or ["-m", "gpudiag"]), "run", "--quiet", "--logdir",
         str(logdir), "--", sys.executable, str(script), str(code)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
        stdin=subprocess.DEVNULL)
    (run_dir,) = run_dirs(logdir)
    return proc, load_report(run_dir)


@pytest.mark.slow
@pytest.mark.parametrize("code", [0, 3])
def test_hostile_event_lines_cost_their_lines_and_the_report_is_finished(
        tmp_path: Path, code: int) -> None:
    proc, report = _run(tmp_path, code)
    assert proc.returncode == code, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "wrote 7" in proc.stdout
    assert report["partial"] is False and report["interrupted"] is False
    found = findings_by_id(report)
    seen = found["run.tensorflow"]
    assert seen["status"] == "warn"
    assert seen["evidence"]["unreadable_event_lines"] == 5, seen
    message = seen["message"]
    assert "5 event line(s) could not be read" in message
    assert "strategy.worker_devices[0] is not str" in " ".join(
        seen["evidence"]["unreadable_event_lines_first"])
    assert any("function.graphs[0]" in x for x in seen["evidence"]["unreadable_event_lines_first"])
    assert message.count("protocol version 7") == 1  # two such lines: said once
    assert seen["evidence"]["newer_protocol_versions"] == [7]
    # the rest of the run was judged: the command's own finding, the process seen
    assert found["run.command"]["evidence"]["returncode"] == code
    assert [p["pid"] for p in seen["evidence"]["python_processes"]]
    assert "run.analysis" not in found


#: gpudiag's CLI in its own process with its final analysis failing (no event line reaches
#: such an error any more: the fault is injected where the analysis starts).
FAILING_ANALYSIS = """
import sys
from gpudiag.run import analyse

def report(*args, **kwargs):
    raise ZeroDivisionError("float division by zero")

analyse.report = report
from gpudiag.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("code", [0, 5])
def test_an_error_of_the_final_analysis_is_a_finding_and_the_exit_code_the_programs(
        tmp_path: Path, code: int) -> None:
    entry = tmp_path / "gpudiag_failing_analysis.py"
    entry.write_text(FAILING_ANALYSIS)
    proc, report = _run(tmp_path, code, entry=[str(entry)])
    assert proc.returncode == code, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert report["partial"] is False and report["interrupted"] is False
    failed = findings_by_id(report)["run.analysis"]
    assert failed["status"] == "warn"
    assert failed["evidence"]["error_type"] == "ZeroDivisionError"
    assert failed["evidence"]["where"].startswith("gpudiag_failing_analysis.py:")
    assert f"exit code {code}" in failed["message"]
    assert (run_dirs(tmp_path / "runs")[0] / layout.REPORT_MD).is_file()


def test_an_events_file_that_is_a_directory_is_named_not_raised(tmp_path: Path) -> None:
    from gpudiag.run import eventfiles

    (tmp_path / layout.run_events_name(4242)).mkdir()
    good = tmp_path / layout.run_events_name(4343)
    good.write_text(json.dumps({"kind": "process", "v": 1, "pid": 4343, "seq": 1}) + "\n")
    observed, bad = eventfiles.observe_all(tmp_path)
    assert [o.pid for o in observed] == [4343]
    assert bad.count == 1 and bad.first[0].startswith(layout.run_events_name(4242))
