"""Where TensorFlow placed the program's ops, gathered in bounded windows (in-program).

TensorFlow 2.21's placement log cannot be turned off again once on
(``tf.debugging.set_log_device_placement(False)`` after the context is initialised still
leaves a line per executed op and per placed node: measured, see benchmarks/RESULTS.md,
"`gpudiag run`'s own cost"), and
a line per eager op through a pipe costs an eager-heavy program 1.6x. So gpudiag does not
ask for the log. It asks TensorFlow for its run metadata instead, in windows:

- the window opens the moment TensorFlow initialises its eager context for the program
  (``Context.ensure_initialized`` is wrapped until then, and restored right after: never
  earlier than the program, nothing per call afterwards);
- while open, TensorFlow keeps, for every function it instantiates (a tf.function's
  graph, and the one-op function each new eager kernel runs as), the partitioned graphs
  after placement: each node with the device TensorFlow assigned it. That is the
  placer's decision, the same one the placement log prints;
- it closes (``export_run_metadata`` then ``disable_run_metadata``) once every loop that
  opened it has run ``window_steps`` steps (past the profiled window of the first loop);
  a loop that starts later opens it again for its own first steps; at exit whatever is
  open is exported.

Each export is one ``placement`` event: per instantiated function its nodes
``[name, op type, device]`` and whether it is an eager op's function. Eager ops are thus
counted once per kernel TensorFlow instantiated (per op type, shapes and device), not per
execution. Outside its windows this costs nothing per op or per step beyond a comparison.
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpudiag.inprogram.agent import patch
from gpudiag.layout import events
from gpudiag.readers.placementlog import PLUMBING_OPS

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent

MAX_NODES_PER_EXPORT = 20000


def _is_eager_function(pre: Any) -> bool:
    """An eager op's one-op function: one node of work, named as its op type."""
    work = [n for n in pre.node if n.op not in PLUMBING_OPS]
    return len(work) == 1 and work[0].name == work[0].op


def graphs_of(metadata: Any, limit: int = MAX_NODES_PER_EXPORT) -> tuple[list[dict[str, Any]],
                                                                         int]:
    """The placed graphs of an exported RunMetadata, and how many nodes were left out."""
    out: list[dict[str, Any]] = []
    kept = dropped = 0
    for fg in metadata.function_graphs:
        nodes = [[n.name, n.op, n.device] for pg in fg.partition_graphs for n in pg.node
                 if n.device]
        if kept + len(nodes) > limit:
            dropped += len(nodes)
            continue
        kept += len(nodes)
        out.append({"eager": _is_eager_function(fg.pre_optimization_graph), "nodes": nodes})
    return out, dropped


class PlacementWindow:
    def __init__(self, agent: Agent, tf: ModuleType, window_steps: int) -> None:
        from tensorflow.python.eager import context

        self.agent = agent
        self.context = context
        self.window_steps = max(1, window_steps)
        self.open = False
        self.windows = 0
        self.pending: set[object] = set()  # loops (step buffers) still inside their window
        self.seen: set[object] = set()  # the loops seen, by window_key or id
        self._lock = threading.RLock()  # enable_run_metadata may re-enter _open
        agent.on_exit(self.at_exit)

    def install(self) -> None:
        """Open the first window as TensorFlow initialises its context for the program."""
        if self._initialised():
            self._open("initialised at import")
            return
        cls = self.context.Context
        original = cls.ensure_initialized
        window = self

        def ensure_initialized(this: Any) -> None:
            original(this)
            if getattr(this, "_context_handle", None) is None:
                return
            cls.ensure_initialized = original
            from gpudiag.inprogram.agent import guard

            guard("opening the placement window", window._open, "context initialised")

        patch(cls, "ensure_initialized", ensure_initialized)

    def _initialised(self) -> bool:
        ctx = self.context.context_safe()
        return ctx is not None and getattr(ctx, "_context_handle", None) is not None

    def _open(self, reason: str) -> None:
        with self._lock:
            if self.open or not self._initialised():  # never initialise it for the program
                return
            self.context.context().enable_run_metadata()
            self.open = True
            self.windows += 1
        self.agent.emit(events.PlacementWindow(reason=reason, window=self.windows))

    def _close(self, reason: str) -> None:
        with self._lock:
            if not self.open or not self._initialised():
                return
            ctx = self.context.context()
            metadata = ctx.export_run_metadata()
            ctx.disable_run_metadata()
            self.open = False
        graphs, dropped = graphs_of(metadata) if metadata is not None else ([], 0)
        self.agent.emit(events.Placement(window=self.windows, reason=reason, graphs=graphs,
                        nodes_left_out=dropped))

    def on_step(self, loop: object, count: int) -> None:
        """Called with each recorded step of a loop (its count from 1)."""
        key = getattr(loop, "window_key", None) or id(loop)
        if count == 1 and key not in self.seen:
            self.seen.add(key)
            self.pending.add(key)
            if not self.open:
                self._open("a new loop started")
        elif count >= self.window_steps and key in self.pending:
            self.pending.discard(key)
            if not self.pending:
                self._close(f"its loops passed {self.window_steps} steps")

    def at_exit(self) -> None:
        self._close("exit")


WINDOW: PlacementWindow | None = None


def install(agent: Agent, tf: ModuleType) -> bool:
    global WINDOW
    config = agent.config
    window = PlacementWindow(agent, tf, config.profile_warmup_steps + config.profile_steps + 1)
    window.install()
    WINDOW = window
    return True


def on_step(loop: object, count: int) -> None:
    if WINDOW is not None and count <= WINDOW.window_steps:
        from gpudiag.inprogram.agent import guard

        guard("placement window", WINDOW.on_step, loop, count)
