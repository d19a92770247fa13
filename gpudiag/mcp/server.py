"""`gpudiag mcp --logdir DIR`: a Model Context Protocol server over stdio (the official
``mcp`` SDK's MCPServer) with four read-only tools over one logdir (docs/mcp.md):
``list_runs``, ``show_run``, ``explain``, ``diff``, each gpudiag.mcp.tools' function.

Bad input (a path outside the logdir, a run that is not there, a file that is not a
trace) is the tool's error (an ``isError`` result with gpudiag's one line), never a
crash of the server. stdout carries the protocol alone: the SDK's stdio transport moves
file descriptor 1 to stderr while it serves, and the server logs only warnings, to
stderr. The tools run one at a time, each in gpudiag.mcp.worker's process under a time
limit (``--call-timeout``) and a memory limit: a call past either is the tool's error,
and the lock that keeps the calls one at a time is never held longer than the limit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from gpudiag import __version__
from gpudiag.errors import GpudiagError
from gpudiag.mcp import tools, worker

INSTRUCTIONS = (
    "gpudiag's diagnoses of TensorFlow GPU runs in one logdir, read-only. Start with "
    "list_runs; show_run gives a run's verdict, its actions and findings (each: id, status "
    "ok/warn/fail/skip, message, advice; evidence=true adds each one's evidence); explain "
    "reads profiler traces (.xplane.pb) inside the logdir; diff compares two runs (did the "
    "change work). Paths are relative to the logdir and never leave it.")

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False,
                            idempotent_hint=True, open_world_hint=False)

RunId = Annotated[str, Field(description="A run's id: its run directory relative to the "
                                         "logdir, as list_runs gives it.")]
TracePath = Annotated[str, Field(description="A .xplane.pb file, or a directory holding "
                                             "profiler traces, relative to the logdir.")]
WholeEvidence = Annotated[bool, Field(description="true: every finding's whole evidence "
                                                 "and the step breakdown (large); false "
                                                 "(default): the verdict, the actions and "
                                                 "the findings without their evidence.")]
Side = Annotated[str, Field(description="A run id, or a directory of profiler traces, "
                                        "relative to the logdir.")]


class _Server(MCPServer):
    """The SDK's server, with an argument that does not fit (missing, of another type) said
    in one line, as every other refusal is: ``run: field required``."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                raise
            said = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: "
                             f"{str(e['msg']).lower()}" for e in cause.errors())
            raise ToolError(f"Error executing tool {name}: {said[:300]}") from cause


def build(logdir: Path, call_timeout_s: float = worker.CALL_TIMEOUT_S) -> MCPServer:
    """The server for ``logdir`` (UsageError when it is not a directory); each call in
    its worker process under ``call_timeout_s`` (gpudiag.mcp.worker)."""
    where = tools.Logdir(logdir)
    lock = threading.Lock()
    calls = worker.Worker(where.root, call_timeout_s)

    def answer(fn: Callable[..., dict[str, Any]], *args: str | bool) -> dict[str, Any]:
        with lock:
            try:
                return calls.call(fn.__name__, *args)
            except GpudiagError as exc:
                raise ToolError(exc.message) from None

    server: MCPServer = _Server(name="gpudiag", version=__version__,
                                  instructions=INSTRUCTIONS, log_level="WARNING")
    server.calls = calls  # type: ignore[attr-defined]

    @server.tool(annotations=READ_ONLY)
    def list_runs() -> dict[str, Any]:
        """Every gpudiag run in the logdir, newest first: id, command, status, the count of
        findings by status, and the verdict's lines. Run directories that could not be
        read (or that lead out of the logdir) are listed under "refused" with why."""
        return answer(tools.list_runs)

    @server.tool(annotations=READ_ONLY)
    def show_run(run: RunId, evidence: WholeEvidence = False) -> dict[str, Any]:
        """One run's verdict first, then the actions its failed and warned findings advise
        (what to change, where, the predicted step), every finding without its evidence
        (id, status, title, question, message, advice, actions) and its training loops'
        step series. With evidence=true: every finding as its report.json holds it, with
        its evidence, and the per-device step breakdown of its bottleneck findings
        (compute, communication, copy, input, host, idle seconds; the causes). A `gpudiag
        try` run starts with "tried": its headline, each fix's measured B/A with its
        interval, verdict, prediction and the line as written and as it would be."""
        return answer(tools.show_run, run, evidence)

    @server.tool(annotations=READ_ONLY)
    def explain(path: TracePath) -> dict[str, Any]:
        """Where the steps' time went in profiler traces inside the logdir: one
        explain.bottleneck finding per trace with each device's parts of the step and the
        bottleneck with its fix. Nothing is run or written."""
        return answer(tools.explain, path)

    @server.tool(annotations=READ_ONLY)
    def diff(a: Side, b: Side) -> dict[str, Any]:
        """Run A (before) against run B (after): each loop's step time with its 95 %
        interval, the bottleneck before and after, the fix's predicted step against the
        measured one, findings that appeared or went. Nothing is written."""
        return answer(tools.diff, a, b)

    return server


def serve(logdir: Path, call_timeout_s: float = worker.CALL_TIMEOUT_S) -> None:
    """Serve ``logdir`` over stdio until the client closes the connection."""
    server = build(logdir, call_timeout_s)
    try:
        server.run("stdio")
    finally:
        server.calls.stop()  # type: ignore[attr-defined]
