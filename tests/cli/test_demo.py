"""`make demo` (scripts/demo.py): each step printed as a command the user can paste as it
is (options before `--`), and a program step's output shown less TensorFlow's C++ log,
which is saved whole (gpudiag.run.cpplog.CppLog), run for real on a child that prints
TensorFlow's own lines as TensorFlow 2.21 printed them here (tests/data)."""

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


@pytest.mark.parametrize("step", demo.STEPS)
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

