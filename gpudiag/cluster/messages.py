"""Reading TensorFlow's messages about multi-worker clusters in a task's output.

The entries themselves (exact text, meaning, fix) are the catalogue's
(gpudiag.catalogue.cluster). ``stragglers`` reads the tasks TensorFlow's coordination service
was still waiting for (``Example stragglers:`` and the task names on the lines after it)
and ``unhealthy_tasks`` the tasks it declared dead (``lost_peers`` adds those a failed
call named); ``scan`` finds every entry in a task's whole stderr with the catalogue's
LineMatcher (one matcher for every command). Pure data and regular expressions: no TensorFlow.
"""

from __future__ import annotations

import re

from gpudiag import catalogue
from gpudiag.catalogue.cluster import ENTRIES
from gpudiag.catalogue.matching import LineMatcher, LogMatch

TASK_RE = re.compile(r"^/job:(\w+)/replica:\d+/task:(\d+)$")
_ALL_CONNECTED = re.compile(r"Waiting for 0/\d+ tasks to connect")


def scan(text: str) -> list[LogMatch]:
    """Every cluster entry found in ``text`` (a task's whole stderr), in catalogue order,
    through the catalogue's one matcher. A crash entry is searched in each line too: a
    traceback's last line is ``Type: message``."""
    matcher = LineMatcher(ENTRIES)
    matcher.feed(text.splitlines())
    return matcher.matches()


def _tasks_after(lines: list[str], start: int) -> list[str]:
    """Task names (``worker-1``) on the lines after ``start`` until a line that is none."""
    found = []
    for line in lines[start + 1:]:
        m = TASK_RE.match(line.strip())
        if m is None:
            break
        found.append(f"{m.group(1)}-{m.group(2)}")
    return found


def stragglers(text: str) -> list[str]:
    """The tasks TensorFlow's coordination service last said it was waiting for
    (``Example stragglers:`` followed by ``/job:worker/replica:0/task:1`` lines); empty
    once it said ``Waiting for 0/N tasks``: every task connected."""
    lines = text.splitlines()
    last: list[str] = []
    for i, line in enumerate(lines):
        if line.rstrip().endswith("Example stragglers:"):
            last = _tasks_after(lines, i)
        elif _ALL_CONNECTED.search(line):
            last = []
    return last


def unhealthy_tasks(text: str) -> list[str]:
    """The tasks TensorFlow declared dead (``... are unhealthy (stopped sending
    heartbeats):`` followed by task lines), in order of first report."""
    lines = text.splitlines()
    found: list[str] = []
    for i, line in enumerate(lines):
        if "are unhealthy (stopped sending heartbeats)" in line:
            found += [t for t in _tasks_after(lines, i) if t not in found]
    return found


def lost_peers(text: str) -> list[str]:
    """The tasks this task's TensorFlow says it lost: declared dead by the coordination
    service, or named by a failed call (``... from remote target /job:worker/replica:0/
    task:1 ...``); which of the two a survivor prints depends on where it was waiting."""
    found = unhealthy_tasks(text)
    entry = catalogue.by_id("cluster-peer-connection-lost")
    for line in text.splitlines():
        m = entry.search(line)
        if m is not None:
            t = TASK_RE.match(m.group("task"))
            name = f"{t.group(1)}-{t.group(2)}" if t else m.group("task")
            if name not in found:
                found.append(name)
    return found


_STILL_WAITING = re.compile(r"CreateSession still waiting for response from worker: "
                            r"/job:(\w+)/replica:\d+/task:(\d+)")


def still_waiting(text: str) -> tuple[list[str], int]:
    """(the tasks, how many lines) TensorFlow's master kept waiting for as it created a
    tf.compat.v1 Session (``CreateSession still waiting for response from worker:
    /job:worker/replica:0/task:0``, every 10 s; master.cc): a task of the cluster spec that
    is not running, so the Session, and the program, never start."""
    found: list[str] = []
    count = 0
    for m in _STILL_WAITING.finditer(text):
        count += 1
        name = f"{m.group(1)}-{m.group(2)}"
        if name not in found:
            found.append(name)
    return found, count
