"""The GPUDIAG tab's routes under hostile run directories (issue 36, items 2, 3 and 6).

The plugin's WSGI routes (what TensorBoard serves) on a logdir holding good runs beside
malformed ones (a finding that is a string, a data section that is a list, NaN in
evidence, deep nesting), a FIFO report.json, a FIFO child config.json and a FIFO
TensorBoard event file (TensorBoard's own reader would block on it), a symlink out of
the logdir, a symlink loop, a diff record whose fields are numbers, and a run directory
whose name is not UTF-8: /runs lists every good run and each bad one with why, within
seconds (a FIFO opened would block it for ever); /run and /diff answer each bad id (a NUL
byte, 300 characters, a loop) with a one-line 400, never a 500; every response says
``X-Content-Type-Options: nosniff``. Then a real TensorBoard: ``--logdir_spec`` naming one
directory serves that one (never a report.json of its working directory); naming two, the
tab is inactive and says why. docs/reliability.md counts these cases.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO
from tensorboard.plugins import base_plugin
from werkzeug.test import Client

from gpudiag import layout
from gpudiag.tb import serve as tbserve
from gpudiag.tbplugin.plugin import GpudiagPlugin

SAMPLE_RUN = next((REPO / "sample_runs" / "run").iterdir())
SAMPLE_PLACEMENT = next((REPO / "sample_runs" / "placement").iterdir())
NON_UTF8 = b"caf\xe9-run"


def _edit(run_dir: Path, key: str, value: Any, *, evidence: bool = False) -> None:
    file = run_dir / layout.REPORT_JSON
    data = json.loads(file.read_text())
    if evidence:
        data["findings"][0]["evidence"][key] = value
    elif key.startswith("data."):
        data["data"][key[5:]] = value
    else:
        data[key] = value
    file.write_text(json.dumps(data))


def _deep(n: int) -> Any:
    value: Any = 1
    for _ in range(n):
        value = [value]
    return value


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "logdir"
    shutil.copytree(SAMPLE_RUN, root / "good")
    shutil.copytree(SAMPLE_PLACEMENT, root / "good-placement")
    for name, key, value, evidence in [
            ("findings-a-string", "findings", ["x"], False),
            ("data-run-a-list", "data.run", [1], False),
            ("nan-evidence", "x", math.nan, True),
            ("deep", "data.deep", {"x": _deep(300)}, False)]:
        shutil.copytree(SAMPLE_RUN, root / name)
        _edit(root / name, key, value, evidence=evidence)
    shutil.copytree(SAMPLE_RUN, root / "fifo")
    (root / "fifo" / layout.REPORT_JSON).unlink()
    os.mkfifo(root / "fifo" / layout.REPORT_JSON)
    shutil.copytree(SAMPLE_PLACEMENT, root / "fifo-child")
    (child,) = (root / "fifo-child" / layout.CHILDREN_DIR).iterdir()
    (child / layout.CONFIG_JSON).unlink(missing_ok=True)
    os.mkfifo(child / layout.CONFIG_JSON)
    shutil.copytree(SAMPLE_RUN, root / "fifo-events")  # TensorBoard's reader would block
    (program,) = (root / "fifo-events").glob(f"{layout.RUN_TB_PREFIX}*")
    os.mkfifo(program / "events.out.tfevents.1.host.1.gpudiag")
    outside = root.parent / "outside"
    shutil.copytree(SAMPLE_RUN, outside)
    (root / "link-out").mkdir()
    (root / "link-out" / layout.REPORT_JSON).symlink_to(outside / layout.REPORT_JSON)
    (root / "loop").symlink_to(root / "loop")
    # a diff run whose record's a and b are numbers: it must not break /diff for any pair
    shutil.copytree(SAMPLE_RUN, root / "diff-numbers")
    _edit(root / "diff-numbers", "command", "diff")
    _edit(root / "diff-numbers", "data.diff", {"a": 1, "b": 2, "loops": 3})
    shutil.copytree(SAMPLE_RUN, root / os.fsdecode(NON_UTF8))  # its bytes as Python holds them
    return root


# ---------------------------------------------------------------- a real TensorBoard
def _get(url: str) -> tuple[int, Any, str]:
    request = urllib.request.Request(url, headers={"X-XSRF-Protected": "1"})
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, json.loads(resp.read()), resp.headers.get(
                "X-Content-Type-Options", "")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), exc.headers.get("X-Content-Type-Options", "")


@pytest.fixture
def spec_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    """TensorBoard started with ``--logdir_spec SPEC`` from a working directory that holds
    a run of its own (which must never be served)."""
    cwd = tmp_path / "cwd"
    shutil.copytree(SAMPLE_PLACEMENT, cwd / "cwd-run")
    monkeypatch.chdir(cwd)
    servers: list[tbserve.Server] = []
    plain = tbserve.tensorboard_argv  # python -m tensorboard.main --logdir ...

    def start(spec: str) -> str:
        monkeypatch.setattr(tbserve, "tensorboard_argv", lambda logdir, port, host: [
            *plain(logdir, port, host)[:3], "--logdir_spec", spec, "--port", "0",
            "--host", "localhost"])
        servers.append(tbserve.start(cwd, 0, "localhost"))
        return servers[-1].url
    yield start
    for server in servers:
        server.stop()


@pytest.mark.slow
def test_logdir_spec_of_one_directory_serves_it_never_the_working_directory(
        spec_server: Any, tmp_path: Path) -> None:
    named = tmp_path / "named"
    shutil.copytree(SAMPLE_RUN, named / "the-run")
    url = spec_server(f"mine:{named}")
    listing = tbserve.get_json(url + "/data/plugins_listing")
    assert listing["gpudiag"]["enabled"]
    status, body, sniff = _get(url + "/data/plugin/gpudiag/runs")
    assert status == 200 and sniff == "nosniff"
    assert [r["id"] for r in body["runs"]] == ["the-run"]


@pytest.mark.slow
def test_logdir_spec_of_two_directories_leaves_the_tab_inactive_saying_why(
        spec_server: Any, tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    shutil.copytree(SAMPLE_RUN, one / "r1")
    shutil.copytree(SAMPLE_RUN, two / "r2")
    url = spec_server(f"a:{one},b:{two}")
    assert not tbserve.get_json(url + "/data/plugins_listing")["gpudiag"]["enabled"]
    status, body, sniff = _get(url + "/data/plugin/gpudiag/runs")
    assert status == 400 and sniff == "nosniff"
    assert "--logdir_spec names 2 directories" in body["error"]


@pytest.fixture(scope="module")
def client(logdir: Path) -> Iterator[Any]:
    plugin = GpudiagPlugin(base_plugin.TBContext(logdir=str(logdir)))
    apps = plugin.get_plugin_apps()

    def get(route: str, query: str = "") -> tuple[int, Any, dict[str, str]]:
        response = Client(apps[route]).get(route + query)
        body = response.get_data(as_text=True)
        return (response.status_code,
                json.loads(body) if response.mimetype == "application/json" else body,
                dict(response.headers))
    yield get


BAD_IDS = ["findings-a-string", "data-run-a-list", "nan-evidence", "deep", "fifo",
           "fifo-child", "fifo-events", "link-out", "loop", "a%00b", "x" * 300, "..%2Foutside",
           "%2Fetc", "missing"]


def _answered(client: Any, route: str, query: str = "") -> tuple[int, Any, dict[str, str]]:
    """The route's answer, within 30 s (a FIFO opened would block it for ever)."""
    answered: list[Any] = []
    thread = threading.Thread(target=lambda: answered.append(client(route, query)),
                              daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), f"{route}{query} blocked (a FIFO was opened)"
    return answered[0]  # type: ignore[no-any-return]


def test_runs_lists_the_good_and_each_bad_run_with_why_without_blocking(client: Any) -> None:
    status, body, headers = _answered(client, "/runs")
    assert status == 200 and headers["X-Content-Type-Options"] == "nosniff"
    by_id = {r["id"]: r for r in body["runs"]}
    assert by_id["good"]["status"] == "complete"
    assert by_id["good-placement"]["status"] == "complete"
    assert body["default"] in ("good", "good-placement", "caf\\xe9-run")
    reasons = {i: r.get("reason", "") for i, r in by_id.items() if r["status"] == "unreadable"}
    assert "findings[0] is str" in reasons["findings-a-string"]
    assert "data.run is list" in reasons["data-run-a-list"]
    assert "is nan" in reasons["nan-evidence"]
    assert "nests deeper than" in reasons["deep"]
    assert "is a FIFO" in reasons["fifo"] and "is a FIFO" in reasons["fifo-child"]
    assert "is a symlink out of the logdir" in reasons["link-out"]
    assert all("\n" not in r for r in reasons.values())


@pytest.mark.parametrize("run_id", BAD_IDS, ids=[i[:20] for i in BAD_IDS])
def test_every_bad_id_is_a_one_line_400_on_run_and_diff(client: Any, run_id: str) -> None:
    for route, query in (("/run", f"?id={run_id}"), ("/diff", f"?a=good&b={run_id}"),
                         ("/diff", f"?a={run_id}&b=good")):
        status, body, headers = _answered(client, route, query)
        assert status == 400, (route, query, body)
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert isinstance(body["error"], str) and "\n" not in body["error"]
        assert len(body["error"]) <= 400


def test_a_good_pair_diffs_despite_a_diff_record_of_numbers(client: Any) -> None:
    status, body, _ = client("/diff", "?a=good&b=good-placement")
    # side by side runs in time: the placement run started first, so it is A whichever
    # the page named first
    assert status == 200 and (body["a"], body["b"]) == ("good-placement", "good")


def test_a_run_whose_name_is_not_utf8_is_listed_escaped_and_opens(client: Any) -> None:
    _, body, _ = client("/runs")
    assert "caf\\xe9-run" in {r["id"] for r in body["runs"]}
    # what the page sends: encodeURIComponent of the id it was given
    status, view, _ = client("/run", "?id=caf%5Cxe9-run")
    assert status == 200 and view["id"] == "caf\\xe9-run" and view["status"] == "complete"


def test_every_response_says_nosniff(client: Any) -> None:
    for route in ("/index.js", "/tried.js", "/style.css", "/runs"):
        assert client(route)[2]["X-Content-Type-Options"] == "nosniff"
