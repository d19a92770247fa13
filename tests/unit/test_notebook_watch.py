"""gpudiag.watch() in this very process (no kernel): what it installs it removes, and
gpudiag's own trouble (a bad logdir, hooks already installed) is one line on stderr while
the block runs as plainly. The kernel-driven tests are tests/e2e/test_notebook.py."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import pytest

import gpudiag
from gpudiag.inprogram import agent as agent_mod
from gpudiag.layout import events
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
    assert w.result.verdict[0].startswith("crash: ZeroDivisionError at "), w.result.verdict


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


# ------------------------------------------------- issue 47: the kernel left as it was
class _Target:
    def act(self, x: int) -> int:
        return x + 1


def _events(run_dir: Path) -> list[Path]:
    return sorted(run_dir.rglob("events-*.jsonl"))


def test_a_hook_the_block_wrapped_passes_straight_through_after_it(tmp_path: Path) -> None:
    """A hook installed as every gpudiag hook is (agent.patch), then wrapped by the block
    (as mlflow.autolog() wraps Model.fit): after the block the wrapper still calls it, and
    it calls what it replaced, writing nothing into the finished run."""
    seen: list[int] = []
    original = _Target.act
    with gpudiag.watch(tmp_path, show=False) as w:
        agent = agent_mod.AGENT
        assert agent is not None

        def act(self: _Target, x: int) -> int:  # records, then calls what it wrapped
            seen.append(x)
            agent.emit(events.HookError(where="test", type="Seen", message=str(x),
                                        traceback=""))
            return original(self, x)
        agent_mod.patch(_Target, "act", act)
        hooked = _Target.act
        _Target.act = lambda self, x: hooked(self, x) * 10  # type: ignore[method-assign]
        assert _Target().act(1) == 20 and seen == [1]
    try:
        assert w.run_dir is not None and w.result is not None
        (file,) = _events(w.run_dir)
        size = file.stat().st_size
        assert _Target().act(2) == 30  # through the block's wrapper, then the original
        assert seen == [1] and file.stat().st_size == size
        assert agent.recorder.closed
    finally:
        _Target.act = original  # type: ignore[method-assign]


def _sigint_during(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> None:
    """``owner.name`` made to receive a real SIGINT (the kernel's interrupt) first."""
    real = getattr(owner, name)

    def interrupted(*args: object, **kwargs: object) -> object:
        os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)
    monkeypatch.setattr(owner, name, interrupted)


@pytest.mark.parametrize(("owner", "name", "where"), [
    ("install", "_install_here", "entry, while the hooks go in"),
    ("watch", "Watch._start_nvml", "entry, before the hooks"),
    ("analyse", "report", "exit, during the analysis"),
    ("install", "_uninstall", "exit, while the hooks come out")])
def test_ctrl_c_in_entry_or_exit_leaves_no_hook_and_ends_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, owner: str, name: str,
        where: str) -> None:
    import importlib

    before = set(threading.enumerate())

    from gpudiag.inprogram import install
    from gpudiag.run import analyse

    watch_mod = importlib.import_module("gpudiag.notebook.watch")  # the package's name
    # `watch` is the function

    target: object = {"install": install, "watch": watch_mod, "analyse": analyse}[owner]
    if "." in name:
        cls, name = name.split(".")
        target = getattr(target, cls)
    _sigint_during(monkeypatch, target, name)
    ran = []
    with pytest.raises(KeyboardInterrupt), gpudiag.watch(tmp_path / "runs", show=False):
        ran.append(True)
    monkeypatch.undo()
    assert agent_mod.AGENT is None and agent_mod.PATCHES == [], where
    assert not _new_gpudiag_threads(before), where
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert load_run(run_dir).status == "interrupted", where
    assert ran == ([] if "entry" in where else [True]), where
    with gpudiag.watch(tmp_path / "again", show=False) as again:  # the next watch works
        pass
    assert again.error is None and again.result is not None


@pytest.mark.parametrize("attempt", range(5))
def test_two_threads_entering_at_once_install_once(tmp_path: Path, attempt: int,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Entered at once (a barrier), with the interpreter switching threads as often as it
    can: one installs, the other gets the documented refusal, no gpudiag thread is left."""
    before = set(threading.enumerate())
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        _two_threads(tmp_path, before)
    finally:
        sys.setswitchinterval(switch)
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def _two_threads(tmp_path: Path, before: set[threading.Thread]) -> None:
    inside = threading.Barrier(2, timeout=60)
    start = threading.Barrier(2, timeout=60)
    errors: dict[int, str | None] = {}

    def enter(i: int) -> None:
        start.wait()
        with gpudiag.watch(tmp_path / f"t{i}", show=False) as w:
            inside.wait()  # both blocks run at once
        errors[i] = w.error

    threads = [threading.Thread(target=enter, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    refused = [e for e in errors.values() if e is not None]
    assert len(errors) == 2 and len(refused) == 1 and "already installed" in refused[0]
    assert agent_mod.AGENT is None and agent_mod.PATCHES == []
    assert not _new_gpudiag_threads(before)


class _BytesPath:
    def __fspath__(self) -> bytes:
        return b"runs"


@pytest.mark.parametrize("bad", [None, 5, b"runs", _BytesPath(), ""])
def test_a_logdir_of_another_type_is_one_line_and_the_block_runs(
        bad: object, capsys: pytest.CaptureFixture[str]) -> None:
    ran = []
    with gpudiag.watch(bad, show=False) as w:  # type: ignore[arg-type]
        ran.append(True)
    assert ran == [True] and w.result is None and agent_mod.AGENT is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpudiag: no diagnosis of this cell: logdir "
                                               "must be a path"), err


def _new_gpudiag_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    """gpudiag's threads started since ``before`` and still alive (a test of another
    module run earlier in this process may have left its own)."""
    return [t for t in threading.enumerate() if t.name.startswith("gpudiag") and t not in before]
