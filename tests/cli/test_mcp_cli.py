"""`gpudiag mcp` (gpudiag/mcp, docs/mcp.md) started as a real subprocess and driven by the
``mcp`` SDK's own client over stdio: the tools listed, each tool's answer on a sample run
and a golden GPU trace, and every refusal an error result, never a crash: a path outside
the logdir, a symlink out of it, a special file, a missing run. stdout holds the protocol
alone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import REPO, TESTS_DIR, assert_usage_error, gpudiag
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import gpudiag as api
from gpudiag.mcp import tools

RUN_ID = "run/2026-11-26T01-21-25-run"
TRACES = "traces/rtx5000_launch_bound"


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A logdir with a sample run and a GPU trace, and beside it, outside, a valid report
    and a trace the server must never read; links and a FIFO inside lead to them."""
    top = tmp_path_factory.mktemp("mcp")
    root = top / "logdir"
    shutil.copytree(REPO / "sample_runs" / RUN_ID, root / RUN_ID)
    shutil.copytree(TESTS_DIR / "data" / "gpu_traces" / "rtx5000_launch_bound", root / TRACES)
    outside = top / "outside"
    shutil.copytree(REPO / "sample_runs" / RUN_ID, outside / "secret-run")
    shutil.copytree(TESTS_DIR / "data" / "gpu_traces" / "v100_gpu_bound", outside / "trace")
    (trace_out,) = (outside / "trace").rglob("*.xplane.pb")
    (root / "escape").symlink_to(outside / "secret-run")  # a run directory out of it
    linked = root / "linked-run"  # a run whose report.json leads out
    linked.mkdir()
    (linked / "report.json").symlink_to(outside / "secret-run" / "report.json")
    (root / "bad-traces").mkdir()  # traces with one file leading out
    (root / "bad-traces" / "host.xplane.pb").symlink_to(trace_out)
    os.mkfifo(root / "fifo.xplane.pb")  # reading it would block forever
    return root


async def _session(logdir: Path, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gpudiag", "mcp", "--logdir", str(logdir)],
        env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=str(logdir.parent))
    out: dict[str, Any] = {"calls": []}
    with anyio.fail_after(240):
        await _calls(params, calls, out)
    return out


async def _calls(params: StdioServerParameters, calls: list[tuple[str, dict[str, Any]]],
                 out: dict[str, Any]) -> None:
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        out["init"] = await session.initialize()
        out["tools"] = (await session.list_tools()).tools
        for name, arguments in calls:
            out["calls"].append(await session.call_tool(name, arguments))


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("list_runs", {}),
    ("show_run", {"run": RUN_ID}),
    ("explain", {"path": TRACES}),
    ("diff", {"a": RUN_ID, "b": RUN_ID}),
    ("diff", {"a": TRACES, "b": RUN_ID}),
    # refused: each an error result, the server still answering after it
    ("show_run", {"run": "../outside/secret-run"}),
    ("show_run", {"run": str(Path("..") / ".." / "etc")}),
    ("show_run", {"run": "/etc"}),
    ("show_run", {"run": "escape"}),
    ("show_run", {"run": "linked-run"}),
    ("show_run", {"run": "run/2026-01-01T00-00-00-run"}),
    ("show_run", {"run": TRACES}),
    ("show_run", {"run": ""}),
    ("explain", {"path": "../outside/trace"}),
    ("explain", {"path": "bad-traces"}),
    ("explain", {"path": "fifo.xplane.pb"}),
    ("explain", {"path": f"{RUN_ID}/report.json"}),
    ("diff", {"a": RUN_ID, "b": "escape"}),
    ("show_run", {}),
    ("list_runs", {}),
]


@pytest.fixture(scope="module")
def answers(logdir: Path) -> dict[str, Any]:
    """One server, one session, every call of CALLS in order (anyio.run: the SDK client is
    async)."""
    result: dict[str, Any] = anyio.run(_session, logdir, CALLS)
    return result


def test_stdout_holds_the_protocol_alone(logdir: Path) -> None:
    """Raw JSON-RPC over the server's pipes: every stdout line is a protocol message, with
    a trace read (xprof) and a refusal among the calls; the server ends when stdin does."""
    calls = [
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "explain", "arguments": {"path": TRACES}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "show_run", "arguments": {"run": "/etc"}}},
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpudiag", "mcp", "--logdir", str(logdir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    watchdog = threading.Timer(120, proc.kill)  # a server that never answers fails, not hangs
    watchdog.start()
    assert proc.stdin is not None and proc.stdout is not None
    try:
        def send(message: dict[str, Any]) -> None:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()

        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}})
        lines = [proc.stdout.readline()]
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for call in calls:
            send(call)
            lines.append(proc.stdout.readline())
        proc.stdin.close()
        lines += proc.stdout.read().splitlines()
        assert proc.wait() == 0
    finally:
        watchdog.cancel()
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    replies = [json.loads(line) for line in lines]
    assert all(r["jsonrpc"] == "2.0" for r in replies)
    by_id = {r["id"]: r for r in replies if "id" in r}
    assert sorted(by_id) == [1, 2, 3]
    assert by_id[2]["result"]["isError"] is False
    assert by_id[2]["result"]["structuredContent"]["findings"][0]["id"] == "explain.bottleneck"
    assert by_id[3]["result"]["isError"] is True


def test_a_logdir_that_is_not_a_directory_is_one_line_exit_2(tmp_path: Path) -> None:
    assert_usage_error(gpudiag("mcp", "--logdir", str(tmp_path / "none")), "not a directory")


def test_a_trace_s_recorded_placement_is_not_read_from_outside_the_logdir() -> None:
    """A logdir that is one configuration of a scaling run: its trace's placement was
    recorded by the run around it, outside the logdir. The library reads it (each tower
    device gets its row); the server does not (one host row), and says the same trace."""
    config = REPO / "sample_runs" / "scaling" / "2026-11-26T01-20-11-scaling" / "towers-4dev"
    (library,) = api.explain(config).report.findings
    assert {f"/device:CPU:{i}" for i in range(1, 5)} <= set(library.evidence["parts_s"])
    (served,) = tools.explain(tools.Logdir(config), ".")["findings"]
    assert list(served["evidence"]["parts_s"]) == ["/host:CPU"]
    inside_run = tools.explain(tools.Logdir(config.parent), "towers-4dev")["findings"]
    assert set(inside_run[0]["evidence"]["parts_s"]) == set(library.evidence["parts_s"])
