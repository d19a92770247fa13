"""`make demo` (scripts/demo.py): each step printed as a command the user can paste as it
is (options before `--`), and a program step's output shown less TensorFlow's C++ log,
which is saved whole (gpudiag.run.cpplog.CppLog), run for real on a child that prints
TensorFlow's own lines as TensorFlow 2.21 printed them here (tests/data). Its last steps:
`run` on the embedded input-bound program, then `gpudiag try --from` that run, whose
closing lines give the measured fix and the line to change."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from helpers import REPO

sys.path.insert(0, str(REPO / "scripts"))
import demo

from gpudiag.run.cpplog import CppLog

#: TensorFlow's C++ lines as 2.21 printed them here (port.cc, cudart_stub.cc,
#: cpu_feature_guard.cc, cuInit's E0000), after the file's comment
CPP_LINES = [ln for ln in (REPO / "tests" / "data" / "tf_messages_cpu_2.21.txt").read_text()
             .splitlines() if not ln.startswith("#")][:4]
ENABLE = ("To enable the following instructions: AVX2 FMA, in other operations, rebuild "
          "TensorFlow with the appropriate compiler flags.")


@pytest.mark.parametrize("step", demo.steps(Path("runs")), ids=lambda s: s[0])
def test_each_step_is_shown_as_a_command_to_paste(step: list[str]) -> None:
    shown, argv = demo._command(step, Path("runs"))
    words = shlex.split(shown)  # what a shell makes of it when pasted
    name = words.index(step[0])
    assert words[name + 1:name + 3] == ["--logdir", "runs"], shown
    if "--" in step:  # the program after `--`, every gpudiag option before it
        cut = words.index("--")
        assert cut > name + 2 and words[cut + 1:] == [
            demo._typed(a) if a == sys.executable else a for a in step[step.index("--") + 1:]]
        assert argv[argv.index("--") + 1:] == step[step.index("--") + 1:]
        assert "\n" not in shown


def test_tensorflows_cpp_log_is_kept_out_and_saved_whole(
        tmp_path: Path, capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    program = tmp_path / "noisy.py"
    assert "cpu_feature_guard.cc" in CPP_LINES[2] and "cuInit" in CPP_LINES[3], CPP_LINES
    lines = ["replicas: 1",
             "WARNING: All log messages before absl::InitializeLog() is called are written "
             "to STDERR", *CPP_LINES[:3], ENABLE, CPP_LINES[3], "Epoch 1/3",
             ENABLE,  # the program's own line, not the second line of a C++ message
             "I0000 in the program's own words: not a C++ log line"]
    program.write_text("import sys\n" + "".join(
        f"print({ln!r}, file=sys.{'stderr' if i % 2 else 'stdout'}, flush=True)\n"
        for i, ln in enumerate(lines)))
    saved = tmp_path / "demo-run.log"
    code, hidden = demo._filtered([sys.executable, str(program)], saved)
    assert code == 0
    assert saved.read_text().splitlines() == lines  # the whole output, in order
    cpp = CppLog()
    noise = [ln for ln in lines if cpp(ln)]
    assert noise == lines[1:7], noise  # the second line of cpu_feature_guard's with it
    assert hidden == 6
    shown = capfdbinary.readouterr().out.decode().splitlines()
    assert shown == [lines[0], *lines[7:]], shown  # the demo's terminal: the program's own



def test_the_last_steps_diagnose_the_embedded_program_and_try_its_fix_from_that_run() -> None:
    *_, run, tried = demo.steps(Path("runs"))
    train = str(demo.train_py(Path("runs")))
    assert run == ["run", "--", sys.executable, train]
    assert tried[0] == "try" and tried[-2:] == [sys.executable, train]
    from_run = demo._from(tried, Path("runs/2026-11-29T10-00-00-run"))
    assert from_run[from_run.index("--from") + 1] == "runs/2026-11-29T10-00-00-run"
    assert from_run.index("--from") < from_run.index("--")
    # the program's line the fix goes on, one line, as the diagnosis will quote it
    assert "dataset = dataset.map(augment).batch(32)\n" in demo.TRAIN_PY.read_text()


def test_the_closing_lines_give_the_measured_fix_and_the_line_to_change() -> None:
    from gpudiag.fixes import Chosen
    from gpudiag.records.trial import TrialFix
    from gpudiag.verdicts import trial as v

    code = "dataset = dataset.map(augment).batch(32)"
    fixed = "dataset = dataset.map(augment, num_parallel_calls=tf.data.AUTOTUNE).batch(32)"
    chosen = Chosen(TrialFix("parallel-map", "map", "train.py", 20), code, fixed, None)
    trials = [v.Trial(f, r, s, 0, None, "") for r in (1, 2, 3)
              for f, s in (("", 0.030), ("parallel-map", 0.017 + r * 0.001))]
    result = v.result_finding([chosen], trials, 40)
    report = {"findings": [v.fix_finding(chosen, trials).to_dict(), result.to_dict()],
              "data": {"try": {"headline": result.evidence["headline"]}}}
    lines = demo.tried_lines(report, Path("runs/demo/train.py"))
    said = " ".join(" ".join(lines[:-3]).split())  # the first line, wrapped under 80 columns
    assert said.startswith("tried 1 fix: num_parallel_calls at train.py:20 makes a step 1.6x "
                           "faster (95 % CI ") and said.endswith(", 3 rounds)")
    assert all(len(ln) <= 78 for ln in lines[:-3])
    assert lines[-3:] == ["the line to change: runs/demo/train.py:20",
                          f"  as written:     {code}", f"  as it would be: {fixed}"]
    # measured no faster (a loaded machine): never "the line to change"
    slow = [v.Trial(f, r, 0.030, 0, None, "") for r in (1, 2, 3) for f in ("", "parallel-map")]
    report["findings"] = [v.fix_finding(chosen, slow).to_dict()]
    assert demo.tried_lines(report, Path("t.py"))[-3] == (
        "the line the fix goes on (no change here): t.py:20")
