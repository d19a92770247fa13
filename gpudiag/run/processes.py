"""The program's Python processes as the parent sees them in /proc, and those the hooks
could not enter.

The hooks enter a Python process through PYTHONPATH and sitecustomize; a process started
with ``python -I``, ``-E`` or ``-S``, with a clean environment (``env -i``), a PYTHONPATH
of its own or an interpreter that cannot load them runs without them, and leaves no
events file. So while the program runs, ``ProcessWatch`` walks its process tree every
POLL_S (``/proc/<pid>/task/<tid>/children``) and appends each Python process it sees,
with why the hooks would not enter it (its command line's options, its environment as
it started: ``/proc/<pid>/environ``), to children/program/processes.jsonl. At the end,
``watched`` keeps those with no events file: each is named in the report (pid,
command, why), and what was not observed there is said, never "TensorFlow was never
imported". A process that lived less than POLL_S may be missed. Linux only (without
/proc nothing is listed).

Where the program's terminal is gpudiag's pseudo-terminal, each poll also counts the
processes holding ``/dev/tty`` open to read, for the keyboard that passes the user's keys
into it meanwhile (gpudiag.run.keyboard); each is recorded once (``tty_read``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpudiag.layout import ENV_RUN_CONFIG, RUN_PROCESSES, run_events_name
from gpudiag.run.keyboard import Keyboard

POLL_S = 0.25
PROC = Path("/proc")
_PYTHON = re.compile(r"^(?:python|pypy)(?:\d+(?:\.\d+)?)?[a-z]?$")
_VALUE_OPTIONS = frozenset("WX")
_FLAGS = {"I": "-I (isolated mode: PYTHONPATH and the environment are ignored, so "
               "gpudiag's sitecustomize is never found)",
          "E": "-E (PYTHON* variables are ignored, PYTHONPATH among them, so gpudiag's "
               "sitecustomize is never found)",
          "S": "-S (no site module, so no sitecustomize)"}


@dataclass(frozen=True)
class Unentered:
    pid: int
    command: str
    why: str


@dataclass(frozen=True)
class TtyReader:
    """A process of the program that opened ``/dev/tty`` to read; ``relayed``: what the
    user typed was passed into it (gpudiag.run.keyboard)."""

    pid: int
    command: str
    relayed: bool = False


TTY = "/dev/tty"
TTY_NOTICE = ("gpudiag: pid {pid} ({command}) opened /dev/tty to read: gpudiag itself has "
              "no terminal to take what you type from, so nothing arrives there; if it "
              "waits for an answer, run it plainly (its stdin, input(), is as plainly)")


def reads_tty(pid: int) -> bool:
    """Whether ``pid`` holds ``/dev/tty`` open for reading (O_RDONLY or O_RDWR)."""
    fds = PROC / str(pid) / "fd"
    with contextlib.suppress(OSError):
        for fd in fds.iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                if str(fd.readlink()) != TTY:
                    continue
                info = (PROC / str(pid) / "fdinfo" / fd.name).read_text()
                mode = int(info.split("flags:")[1].split()[0], 8) & os.O_ACCMODE
                if mode != os.O_WRONLY:
                    return True
    return False


def children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in (PROC / str(pid) / "task").iterdir():
            with contextlib.suppress(OSError):
                found += [int(p) for p in (task / "children").read_text().split()]
    return found


def tree(root: int) -> list[tuple[int, int]]:
    """(pid, parent's pid) of ``root`` and every descendant still its descendant."""
    out, todo = [(root, 0)], [root]
    while todo:
        parent = todo.pop()
        for child in children(parent):
            out.append((child, parent))
            todo.append(child)
    return out


def _argv(pid: int) -> list[str]:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [w.decode("utf-8", "replace") for w in raw.split(b"\0")[:-1]]


def is_python(pid: int, argv: list[str]) -> bool:
    try:
        exe = str((PROC / str(pid) / "exe").readlink())
    except OSError:
        exe = argv[0] if argv else ""
    return bool(_PYTHON.match(Path(exe).name) or (argv and _PYTHON.match(Path(argv[0]).name)))


def flags(argv: list[str]) -> set[str]:
    """The one-letter options of a Python command line before its script, -c or -m."""
    found: set[str] = set()
    i = 1
    while i < len(argv):
        word = argv[i]
        if not word.startswith("-") or word in ("-", "--"):
            break
        if word.startswith("--"):
            i += 1
            continue
        for j, flag in enumerate(word[1:], 1):
            if flag in "cm":
                return found
            found.add(flag)
            if flag in _VALUE_OPTIONS:
                i += 0 if j < len(word) - 1 else 1
                break
        i += 1
    return found


def _environ(pid: int) -> dict[str, str] | None:
    try:
        raw = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    env = {}
    for item in raw.split(b"\0"):
        name, eq, value = item.decode("utf-8", "replace").partition("=")
        if eq:
            env[name] = value
    return env


HOOKS_NEED = (3, 11)  # the hooks' sitecustomize stands aside in an older interpreter
_VERSION = re.compile(r"^(?:python|pypy)(\d+)\.(\d+)")


def interpreter_version(pid: int, argv: list[str]) -> tuple[int, int] | None:
    """The interpreter's version as its executable's name says it (python3.8), if it does."""
    names = [argv[0] if argv else ""]
    with contextlib.suppress(OSError):
        names.insert(0, str((PROC / str(pid) / "exe").resolve()))
    for name in names:
        m = _VERSION.match(Path(name).name)
        if m:
            return int(m.group(1)), int(m.group(2))
    return None


def why_not_entered(argv: list[str], env: dict[str, str] | None, hooks_dir: str,
                    version: tuple[int, int] | None = None) -> str:
    """Why the hooks would not enter a Python process with this command and environment
    (the reason they cannot: the interpreter, when nothing else explains it)."""
    given = flags(argv)
    named = [text for flag, text in _FLAGS.items() if flag in given]
    if named:
        return "; ".join(named)
    if env is not None and ENV_RUN_CONFIG not in env:
        return ("a clean environment (gpudiag's variables were not passed on: env -i, or "
                "an env= of its own)")
    if env is not None and hooks_dir not in env.get("PYTHONPATH", "").split(os.pathsep):
        return "its PYTHONPATH does not hold gpudiag's hooks directory (set by the program)"
    if version is not None and version < HOOKS_NEED:
        return (f"its interpreter ({argv[0] if argv else '?'}) is Python "
                f"{version[0]}.{version[1]}, older than gpudiag's hooks need "
                f"({HOOKS_NEED[0]}.{HOOKS_NEED[1]} or later): they stand aside there")
    return (f"its interpreter ({argv[0] if argv else '?'}) did not load gpudiag's "
            "sitecustomize (another Python, or its site module failed)")


class ProcessWatch(threading.Thread):
    """Appends each Python process of the program's tree, first seen (by pid and command
    line: an ``exec`` is seen again), to ``path``; a fork of its parent (same command
    line) is its parent's. ``root`` is gpudiag's process-group holder (gpudiag.procs.shim,
    started ``python -I -S``), the program's parent: not listed."""

    def __init__(self, root: int, path: Path, hooks_dir: str, *, tty: bool = False,
                 say: Callable[[str], None] | None = None,
                 keyboard: Keyboard | None = None) -> None:
        super().__init__(name="gpudiag-run-processes", daemon=True)
        self.root, self.path, self.hooks_dir = root, path, hooks_dir
        self.tty, self.say = tty, say  # the program's terminal is gpudiag's pseudo-terminal
        self.keyboard = keyboard  # relays the user's keys there while a process reads it
        self._seen: set[tuple[int, str]] = set()
        self._tty_told: set[int] = set()
        self._ended = threading.Event()

    def run(self) -> None:
        with contextlib.suppress(OSError), self.path.open("a", encoding="utf-8") as out:
            if self.tty:
                out.write(json.dumps({"program_terminal": True}) + "\n")
            while True:
                self.poll(out)
                if self._ended.wait(POLL_S):
                    break

    def poll(self, out: object) -> None:
        lines = []
        argvs: dict[int, list[str]] = {}
        readers = 0
        for pid, parent in tree(self.root):
            argv = argvs[pid] = _argv(pid)
            if self.tty and pid != self.root and reads_tty(pid):
                readers += 1
                if pid not in self._tty_told:
                    lines.append(self._tty_read(pid, argv))
            key = (pid, "\0".join(argv))
            if not argv or key in self._seen or pid == self.root:
                continue
            self._seen.add(key)
            if argv == argvs.get(parent) or not is_python(pid, argv):
                continue
            lines.append(json.dumps({"pid": pid, "command": " ".join(argv)[:500],
                                     "why": why_not_entered(
                                         argv, _environ(pid), self.hooks_dir,
                                         interpreter_version(pid, argv))}) + "\n")
        if self.keyboard is not None:
            self.keyboard.told(readers)
        if lines:
            out.write("".join(lines))  # type: ignore[attr-defined]
            out.flush()  # type: ignore[attr-defined]

    def _tty_read(self, pid: int, argv: list[str]) -> str:
        """The row for a process reading /dev/tty; said once on gpudiag's side."""
        command = " ".join(argv)[:500]
        relayed = self.keyboard is not None
        if not self._tty_told and self.say is not None and not relayed:
            with contextlib.suppress(Exception):
                self.say(TTY_NOTICE.format(pid=pid, command=command[:80]))
        self._tty_told.add(pid)
        return json.dumps({"pid": pid, "command": command, "tty_read": True,
                           "relayed": relayed}) + "\n"

    def stop(self) -> None:
        self._ended.set()
        self.join(timeout=2 * POLL_S + 1)


@dataclass(frozen=True)
class Watched:
    """What the process watch recorded, read back once at the end."""

    unentered: list[Unentered]  # Python processes that left no events file
    tty_readers: list[TtyReader]  # processes seen holding /dev/tty open to read
    terminal: bool  # the program's stdout or stderr was gpudiag's pseudo-terminal


def watched(events_dir: Path) -> Watched:
    rows = []
    with contextlib.suppress(OSError):
        for line in (events_dir / RUN_PROCESSES).read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                row = json.loads(line)
                if isinstance(row, dict):
                    rows.append(row)
    unentered: dict[int, Unentered] = {}
    readers: dict[int, TtyReader] = {}
    for row in rows:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            if "pid" not in row:
                continue
            pid, command = int(str(row["pid"])), str(row["command"])
            if row.get("tty_read"):
                readers[pid] = TtyReader(pid, command, bool(row.get("relayed")))
            elif "why" in row and not (events_dir / run_events_name(pid)).exists():
                unentered[pid] = Unentered(pid, command, str(row["why"]))
    return Watched(sorted(unentered.values(), key=lambda u: u.pid),
                   sorted(readers.values(), key=lambda t: t.pid),
                   any(row.get("program_terminal") for row in rows))
