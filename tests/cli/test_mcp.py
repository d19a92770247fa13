"""`gpudiag mcp` (gpudiag/mcp, docs/mcp.md) started as a real subprocess and driven by the
``mcp`` SDK's own client over stdio: the tools listed, each tool's answer on a sample run
and a golden GPU trace, and every refusal an error result, never a crash: a path outside
the logdir, a symlink out of it, a special file, a missing run. stdout holds the protocol
alone."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import REPO, TESTS_DIR, TRY_LINE, assert_usage_error, gpudiag, write_try_run
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import gpudiag as api
from gpudiag.mcp import tools
from gpudiag.rundir.records import PART_NAMES

RUN_ID = "run/2026-11-26T01-21-25-run"
TRACES = "traces/rtx5000_launch_bound"
TOOLS = {"list_runs", "show_run", "explain", "diff"}


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
    ("show_run", {"run": RUN_ID, "evidence": True}),
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


def _call(answers: dict[str, Any], name: str, arguments: dict[str, Any]) -> Any:
    return answers["calls"][CALLS.index((name, arguments))]


def _error(answers: dict[str, Any], name: str, arguments: dict[str, Any]) -> str:
    result = _call(answers, name, arguments)
    assert result.is_error, result
    (content,) = result.content
    return str(content.text)


def _ok(answers: dict[str, Any], name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = _call(answers, name, arguments)
    assert not result.is_error, result.content
    data: dict[str, Any] = result.structured_content
    assert json.loads(result.content[0].text) == data  # the same JSON as text
    return data


def test_the_four_read_only_tools_are_listed(answers: dict[str, Any]) -> None:
    assert answers["init"].server_info.name == "gpudiag"
    tools = {t.name: t for t in answers["tools"]}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and tool.annotations.read_only_hint is True
        assert tool.annotations.destructive_hint is False
    assert tools["diff"].input_schema["required"] == ["a", "b"]


def test_list_runs_lists_the_run_and_refuses_what_leads_out(answers: dict[str, Any],
                                                            logdir: Path) -> None:
    data = _ok(answers, "list_runs", {})
    assert data["logdir"] == str(logdir.resolve())
    (run,) = data["runs"]
    assert run["id"] == RUN_ID and run["command"] == "run" and run["status"] == "complete"
    assert run["verdict"][0].startswith("gpudiag run:")
    assert data["refused"] == [{"id": "linked-run",
                                "why": "linked-run/report.json is a symlink out of the logdir"}]
    assert answers["calls"][-1].structured_content == data  # still serving after errors


def test_show_run_gives_the_verdict_and_actions_first_the_evidence_on_request(
        answers: dict[str, Any], logdir: Path) -> None:
    """By default: the verdict, then the actions, then the findings without their
    evidence (a few KB); ``evidence`` (in the tool's schema) asks for the whole of it."""
    tools_listed = {t.name: t for t in answers["tools"]}
    schema = tools_listed["show_run"].input_schema
    assert schema["required"] == ["run"] and schema["properties"]["evidence"]["default"] is False
    assert "evidence" in schema["properties"]["evidence"]["description"]
    brief = _ok(answers, "show_run", {"run": RUN_ID})
    whole = _ok(answers, "show_run", {"run": RUN_ID, "evidence": True})
    assert list(brief)[:2] == ["verdict", "actions"] and brief["verdict"] == whole["verdict"]
    on_disk = json.loads((logdir / RUN_ID / "report.json").read_text())
    assert brief["findings"] == [{k: v for k, v in f.items() if k != "evidence"}
                                 for f in on_disk["findings"]]
    assert "breakdown" not in brief and brief["loops"] == whole["loops"]
    assert len(json.dumps(brief)) < len(json.dumps(whole)) / 2



def test_show_runs_actions_are_the_failed_and_warned_findings_worst_first(
        tmp_path: Path) -> None:
    """What to change, where, and the step it should give: each action of a fail or warn
    finding, fails first, named by its finding; an ok finding's none."""
    run = tmp_path / "logdir" / RUN_ID
    shutil.copytree(REPO / "sample_runs" / RUN_ID, run)
    report = json.loads((run / "report.json").read_text())
    fix = {"what": "pass num_parallel_calls=tf.data.AUTOTUNE", "where": "train.py:33",
           "predicted": {"step_s": 0.0174, "low_s": 0.0169, "high_s": 0.018}}
    for f, status in zip(report["findings"][:3], ("warn", "fail", "ok"), strict=True):
        f["status"], f["actions"] = status, [{**fix, "where": f"train.py:{status}"}]
    (run / "report.json").write_text(json.dumps(report))
    brief = tools.show_run(tools.Logdir(tmp_path / "logdir"), RUN_ID)
    second, first = (f["id"] for f in report["findings"][:2])
    assert brief["actions"] == [{"finding": first, "status": "fail", **fix,
                                 "where": "train.py:fail"},
                                {"finding": second, "status": "warn", **fix,
                                 "where": "train.py:warn"}]


def test_show_run_reads_a_try_run_its_answer_first_the_numbers_on_request(
        tmp_path: Path) -> None:
    """A `gpudiag try` run: the verdict, then what was tried (the headline, each fix's
    measured result in words, its verdict and its change at the line, the fixes not
    tried), then the actions; with ``evidence`` each fix's numbers and every finding whole."""
    logdir = tmp_path / "logdir"
    try_dir = write_try_run(logdir / "try")
    run_id = try_dir.relative_to(logdir).as_posix()
    brief = tools.show_run(tools.Logdir(logdir), run_id)
    report = json.loads((try_dir / "report.json").read_text())
    assert list(brief)[:3] == ["verdict", "tried", "actions"]
    tried = brief["tried"]
    assert tried["headline"] == report["data"]["try"]["headline"] == brief["verdict"][0]
    parallel, prefetch = tried["fixes"]
    assert parallel["label"] == "num_parallel_calls at train.py:48"
    assert (parallel["verdict"], prefetch["verdict"]) == ("faster", "no change")
    assert parallel["measured"] == "B/A 0.52 (95 % CI 0.51-0.52, 3 rounds)"
    assert parallel["as_written"] == TRY_LINE and "num_parallel_calls=tf.data.AUTOTUNE" in \
        parallel["as_it_would_be"]
    assert parallel["held"] == "outside its interval" and "ratio" not in parallel
    assert [n["what"] for n in tried["not_tried"]] == ["call .cache() after the map"]
    assert all("evidence" not in f for f in brief["findings"])
    whole = tools.show_run(tools.Logdir(logdir), run_id, evidence=True)
    assert whole["findings"] == report["findings"]
    numbers = whole["tried"]["fixes"][0]
    evidence = next(f["evidence"] for f in report["findings"]
                    if f["id"] == "try.fix.parallel-map")
    assert (numbers["ratio"], numbers["ratio_low"], numbers["ratio_high"], numbers["rounds"]) \
        == (evidence["ratio"], evidence["ratio_low"], evidence["ratio_high"], 3)
    assert json.dumps(whole, allow_nan=False)  # JSON as the protocol sends it
    assert str(tmp_path) not in json.dumps(brief) + json.dumps(whole)


def test_show_run_gives_the_verdict_and_the_typed_findings(answers: dict[str, Any],
                                                           logdir: Path) -> None:
    data = _ok(answers, "show_run", {"run": RUN_ID, "evidence": True})
    on_disk = json.loads((logdir / RUN_ID / "report.json").read_text())
    assert data["id"] == RUN_ID and data["command"] == "run"
    assert data["findings"] == on_disk["findings"]
    assert set(data["findings"][0]) >= {"id", "status", "message", "evidence", "advice"}
    assert data["verdict"] and data["summary"] == on_disk["summary"]
    (b,) = data["breakdown"]  # flat: the finding's id and status, its evidence's fields
    assert b["finding_id"] == "run.bottleneck" and b["status"] == "ok"
    parts = {f"{p}_s" for p in PART_NAMES}
    assert b["devices"] and all(set(d) >= parts | {"device", "period_s"}
                                for d in b["devices"].values())
    (loop,) = data["loops"]
    assert loop["name"] == "Model.fit" and loop["steps"] > 0 and loop["median_step_s"] > 0


def test_explain_names_the_launch_bound_trace_and_writes_nothing(answers: dict[str, Any],
                                                                 logdir: Path) -> None:
    data = _ok(answers, "explain", {"path": TRACES})
    assert data["id"] == TRACES and data["command"] == "explain"
    (f,) = data["findings"]
    assert f["id"] == "explain.bottleneck" and f["evidence"]["causes"] == ["launch-bound"]
    assert f["evidence"]["trace"].startswith(f"{TRACES}/"), f["evidence"]["trace"]  # served
    assert str(logdir.resolve()) not in json.dumps(data)
    assert sorted(p.name for p in logdir.iterdir()) == [
        "bad-traces", "escape", "fifo.xplane.pb", "linked-run", "run", "traces"]
    assert sorted(p.name for p in logdir.parent.iterdir()) == ["logdir", "outside"]


def test_diff_compares_two_runs_in_the_logdir(answers: dict[str, Any], logdir: Path) -> None:
    same = _ok(answers, "diff", {"a": RUN_ID, "b": RUN_ID})
    ids = {f["id"]: f["status"] for f in same["findings"]}
    assert ids["diff.step-time.model.fit"] == "ok" and "fail" not in ids.values()
    assert same["diff"]["command_a"] == same["diff"]["command_b"] == "run"
    assert (same["diff"]["a"], same["diff"]["b"]) == (RUN_ID, RUN_ID)  # not the machine's
    assert str(logdir.resolve()) not in json.dumps(same)
    mixed = _ok(answers, "diff", {"a": TRACES, "b": RUN_ID})
    assert mixed["diff"]["command_a"] == "explain" and mixed["diff"]["command_b"] == "run"


@pytest.mark.parametrize(("name", "arguments", "says"), [
    ("show_run", {"run": "../outside/secret-run"}, "../outside/secret-run is outside the logdir"),
    ("show_run", {"run": "../../etc"}, "../../etc is outside the logdir"),
    ("show_run", {"run": "/etc"}, "/etc is outside the logdir"),
    ("show_run", {"run": "escape"}, "escape is outside the logdir"),
    ("show_run", {"run": "linked-run"}, "linked-run/report.json is a symlink out of the logdir"),
    ("show_run", {"run": "run/2026-01-01T00-00-00-run"},
     "run/2026-01-01T00-00-00-run: no such file or directory in the logdir"),
    ("show_run", {"run": TRACES}, f"{TRACES}: no such run in the logdir"),
    ("show_run", {"run": ""}, "give a path relative to the logdir"),
    ("explain", {"path": "../outside/trace"}, "../outside/trace is outside the logdir"),
    ("explain", {"path": "bad-traces"},
     "bad-traces/host.xplane.pb is a symlink out of the logdir"),
    ("explain", {"path": "fifo.xplane.pb"}, "fifo.xplane.pb is not a regular file"),
    ("explain", {"path": f"{RUN_ID}/report.json"}, "is not a profiler trace (*.xplane.pb)"),
    ("diff", {"a": RUN_ID, "b": "escape"}, "escape is outside the logdir"),
    ("show_run", {}, "run"),
])
def test_bad_input_is_the_tool_s_error(answers: dict[str, Any], name: str,
                                       arguments: dict[str, Any], says: str) -> None:
    text = _error(answers, name, arguments)
    assert says in text and "Traceback" not in text
    assert "secret" not in text.replace("../outside/secret-run", "")  # no target shown


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


def test_the_client_docs_mcp_md_shows_works(tmp_path: Path) -> None:
    """docs/mcp.md's client (its first python block, the mcp SDK 2.x's names) run as a
    user runs it, against a logdir holding an explain run of the launch-bound golden trace:
    the tools, the run's verdict, its bottleneck's actions, a refusal as the tool's error."""
    block = re.search(r"```python\n(.*?)```", (REPO / "docs" / "mcp.md").read_text(), re.S)
    assert block is not None
    client = tmp_path / "client.py"
    client.write_text(block.group(1))
    server = tmp_path / "gpudiag"  # the environment's `gpudiag`, this checkout's package
    server.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m gpudiag "$@"\n')
    server.chmod(0o755)
    logdir = tmp_path / "runs"
    api.explain(TESTS_DIR / "data" / "gpu_traces" / "rtx5000_launch_bound", logdir=logdir)
    out = subprocess.run([sys.executable, str(client), str(server), str(logdir)],
                         capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:4] == ["tool list_runs()", "tool show_run(run)", "tool explain(path)",
                         "tool diff(a, b)"]
    assert re.fullmatch(r"\S+-explain: gpudiag explain: 0 failed, 1 warning, .*", lines[4])
    assert lines[5:] == [
        "explain.bottleneck: XLA: jit_compile=True in compile() or on the tf.function",
        "explain.bottleneck: run several steps in each call of the step function",
        "error: Error executing tool show_run: ../etc is outside the logdir"]
