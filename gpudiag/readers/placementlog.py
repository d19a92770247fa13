"""Parse TensorFlow's device-placement log (``tf.debugging.set_log_device_placement``).

TF writes two kinds of lines to stderr through its C++ logging (visible only when
TF_CPP_MIN_LOG_LEVEL is 0, which the runner sets for the placement probe):

- eager execution:  ``... execute.cc:1775] Executing op MatMul in device
  /job:localhost/replica:0/task:0/device:CPU:1``
- graph placement:  ``... placer.cc:162] tower_0/MatMul: (MatMul):
  /job:localhost/replica:0/task:0/device:CPU:1`` (each on one line)

Every eager op is run as a tiny single-op function, so its own placer block
(``a: (_Arg)``, ``MatMul: (MatMul)``, ``product_RetVal: (_Retval)``) comes just before its
``Executing op`` line; those blocks are dropped, the eager line stands for the op. A placer
block followed by ``Executing op __inference_f_9`` is the graph of tf.function ``f``: its
nodes are kept as ``graph`` rows of that function. The probe writes ``SECTION_MARKER``
lines between its parts so the parent can parse each part on its own.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from gpudiag.devnames import short_device

SECTION_MARKER = "GPUDIAG-SECTION "

# The prefix of a TensorFlow C++ log line: severity, date, time, thread id, file:line.
_LOG_THREAD = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+(?P<tid>\d+) \S+:\d+\]")
_EAGER = re.compile(r"Executing op (?P<op>\S+) in device (?P<device>\S+)")
_GRAPH = re.compile(r"placer\.cc:\d+\]\s+(?P<node>.+?): \((?P<type>[^)]+)\): (?P<device>/\S+)\s*$")

# Function plumbing, not work: left out of per-device op counts.
PLUMBING_OPS = frozenset(
    {"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval", "NoOp", "_Send", "_Recv"}
)


@dataclass(frozen=True)
class PlacementRow:
    kind: str  # "eager" (an op executed eagerly) | "graph" (a node of a tf.function graph)
    op: str  # eager: op name; graph: node name
    op_type: str
    device: str  # short form: /device:CPU:1
    function: str | None = None  # graph rows: the tf.function that ran them, when known

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _is_function(op: str) -> bool:
    return op.startswith("__") or "_inference_" in op


def lines_of_thread(text: str, tid: int) -> str:
    """The C++ log lines of ``text`` written by thread ``tid``. Several processes writing
    to one stderr are told apart this way: TensorFlow writes the placement log from the
    thread that runs the op or instantiates the function, the program's main thread, whose
    id is the process id."""
    keep = []
    for line in text.splitlines():
        m = _LOG_THREAD.match(line)
        if m is not None and int(m["tid"]) == tid:
            keep.append(line)
    return "\n".join(keep)


def parse(text: str) -> list[PlacementRow]:
    """All placement rows in ``text`` (a captured stderr), in order."""
    rows: list[PlacementRow] = []
    pending: list[tuple[str, str, str]] = []
    for line in text.splitlines():
        graph = _GRAPH.search(line)
        if graph:
            pending.append((graph["node"], graph["type"], short_device(graph["device"])))
            continue
        eager = _EAGER.search(line)
        if not eager:
            continue
        op, device = eager["op"], short_device(eager["device"])
        if _is_function(op):
            rows += [PlacementRow("graph", n, t, d, op) for n, t, d in pending]
            rows.append(PlacementRow("eager", op, "function", device))
        else:
            rows.append(PlacementRow("eager", op, op, device))
        pending = []
    # Graphs placed but not launched by an eager call (e.g. nested functions) still count.
    rows += [PlacementRow("graph", n, t, d, None) for n, t, d in pending]
    return rows


def split_sections(text: str) -> dict[str, str]:
    """Split stderr at SECTION_MARKER lines: {section name: text}; text before any is ''."""
    sections: dict[str, list[str]] = {"": []}
    current = ""
    for line in text.splitlines():
        if line.startswith(SECTION_MARKER):
            current = line[len(SECTION_MARKER):].strip()
            sections.setdefault(current, [])
            continue
        sections[current].append(line)
    return {name: "\n".join(lines) for name, lines in sections.items()}


def is_work(row: PlacementRow) -> bool:
    """A row that is real work: not function plumbing, not the function call itself."""
    return row.op_type not in PLUMBING_OPS and row.op_type != "function"


def op_counts_by_device(rows: list[PlacementRow]) -> dict[str, int]:
    """Ops of real work per device, sorted by device name."""
    counts = Counter(r.device for r in rows if is_work(r))
    return dict(sorted(counts.items()))
