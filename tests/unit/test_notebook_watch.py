"""gpudiag.watch() in this very process (no kernel): what it installs it removes, and
gpudiag's own trouble (a bad logdir, hooks already installed) is one line on stderr while
the block runs as plainly. The kernel-driven tests are tests/test_notebook.py."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

import gpudiag
from gpudiag.inprogram import agent as agent_mod
from gpudiag.notebook.magic import parse
from gpudiag.rundir.load import load_run


def test_the_process_is_as_it_was_after_the_block(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    meta_path = list(sys.meta_path)
    hooks = (sys.excepthook, threading.excepthook)
    with gpudiag.watch(tmp_path / "runs", show=False) as w:
        assert agent_mod.AGENT is not None  # installed for the block
        assert sys.excepthook is not hooks[0]
        assert any(type(f).__module__.startswith("gpudiag") for f in sys.meta_path)
        value = sum(range(10))
    assert value == 45
    # gpudiag's finder gone; a library the analysis imported may add its own (absl's)
    assert [f for f in sys.meta_path if f in meta_path] == meta_path
    assert not any(type(f).__module__.startswith("gpudiag") for f in sys.meta_path)
    assert (sys.excepthook, threading.excepthook) == hooks
    assert agent_mod.AGENT is None and agent_mod.PATCHES == []
    assert w.error is None and w.result is not None
    run = load_run(w.run_dir)  # type: ignore[arg-type]
    assert run.command == "run" and run.status == "complete"
    seen = run.finding("run.tensorflow")
    assert seen is not None  # no TensorFlow in the block: said, not guessed
    assert capsys.readouterr().err == ""


def test_a_bad_logdir_is_one_line_and_the_block_runs(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("mine")
    ran = []
    with gpudiag.watch(not_a_dir, show=False) as w:
        ran.append(True)
    assert ran == [True]
    assert not_a_dir.read_text() == "mine"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpudiag: no diagnosis of this cell:"), err
    assert w.result is None and w.error is not None
    assert agent_mod.AGENT is None


def test_a_watch_inside_a_watch_is_refused_in_one_line(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with gpudiag.watch(tmp_path / "outer", show=False) as outer:
        with gpudiag.watch(tmp_path / "inner", show=False) as inner:
            pass
        assert agent_mod.AGENT is not None  # the outer one's hooks stay
    assert inner.result is None and "already installed" in (inner.error or "")
    assert outer.result is not None and agent_mod.AGENT is None
    assert load_run(next((tmp_path / "inner").iterdir())).report.partial
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err


def test_the_block_exception_is_the_blocks(tmp_path: Path) -> None:
    with pytest.raises(ZeroDivisionError) as caught, gpudiag.watch(tmp_path, show=False) as w:
        _ = 1 / 0
    assert caught.value.__traceback__ is not None
    crash = w.result.finding("run.crash")
    assert crash is not None and crash["status"] == "fail"
    assert "ZeroDivisionError" in crash["message"]


@pytest.mark.parametrize(("line", "expected"), [
    ("", {}),
    ("--logdir runs2 --profile-warmup 3", {"logdir": "runs2", "profile_warmup_steps": 3}),
    ("--profile-steps=0", {"profile_steps": 0}),
])
def test_the_magic_line(line: str, expected: dict[str, object]) -> None:
    assert parse(line) == expected


@pytest.mark.parametrize(("line", "needle"), [
    ("--bogus 1", "unknown option '--bogus'"),
    ("--logdir", "--logdir needs a value"),
    ("--profile-warmup x", "takes a whole number"),
    ("--profile-steps -1", "takes a number >= 0"),
])
def test_a_bad_magic_line(line: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse(line)


@pytest.mark.parametrize("filename", [
    "<ipython-input-3-5f2b8c1d9e0a>",  # IPython's shell, Colab
    "/tmp/ipykernel_4242/2873465123.py",  # a Jupyter kernel's cell
])
def test_a_notebook_cell_is_the_programs_own_code(filename: str) -> None:
    from gpudiag.inprogram.usercode import is_user_file

    assert is_user_file(filename)
    assert not is_user_file("<frozen importlib._bootstrap>")


def test_a_cells_file_is_named_as_ipython_names_it() -> None:
    from gpudiag.notebook.display import name_cells

    cells = {"/tmp/ipykernel_42/2873465123.py": 3}
    assert name_cells("map at 2873465123.py:7 (`x`); again 2873465123.py:9", cells) == \
        "map at In[3] line 7 (`x`); again In[3] line 9"
    assert name_cells("map at <ipython-input-4-5f2b8c1d9e0a>:2", {}) == "map at In[4] line 2"
    assert name_cells("train.py:7", cells) == "train.py:7"
