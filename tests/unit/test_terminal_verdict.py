"""The terminal ends with the verdict: at most six lines under 80 columns, above nothing
else of gpudiag's; on a machine where TensorFlow lists no GPU it says the work ran on the
CPU and why, from the recorded evidence, and never "all checks passed"
(gpudiag.verdicts.headline, gpudiag.execute and its render_table, gpudiag.scaling.table)."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

from helpers import REPO
from rich.console import Console

from gpudiag.execute import render_table
from gpudiag.layout.units import counted
from gpudiag.report import Action, Finding, Prediction, Report
from gpudiag.reportmd import to_markdown
from gpudiag.scaling.table import TERMINAL_HEADERS, rich_table
from gpudiag.verdicts import headline
from gpudiag.verdicts.fix_said import action_said, loop_of, on_loop

SAMPLE = REPO / "sample_runs"


def _sample(command: str) -> dict[str, Any]:
    (path,) = SAMPLE.glob(f"{command}/*/report.json")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _entries(lines: list[str]) -> list[str]:
    """The verdict's entries, each whole: a wrapped entry's lines (indented) joined."""
    out: list[str] = []
    for ln in lines:
        if ln.startswith(" ") and out:
            out[-1] += " " + ln.strip()
        else:
            out.append(ln)
    return out


def _report(**devices: Any) -> dict[str, Any]:
    return {"command": "env", "devices": {"physical_gpus": [], **devices}, "findings": [],
            "environment": {}, "data": {}}


def test_the_reason_comes_from_the_evidence_only() -> None:
    hidden = _report(cuda_visible_devices="")
    assert headline.why_no_gpu(hidden) == "CUDA_VISIBLE_DEVICES='' hides every GPU"
    cpu_build = _report()
    cpu_build["environment"] = {"tensorflow": {"is_built_with_cuda": False}}
    assert headline.why_no_gpu(cpu_build) == "TensorFlow is a CPU-only build"
    assert headline.why_no_gpu(_report(cuda_visible_devices="0,1")) == "why: see gpudiag env"
    # NVML answered (the driver is there): TensorFlow's CUDA is what did not start
    nvml = _report()
    nvml["findings"].append({"id": "run.every-gpu-used", "status": "fail", "message": "",
                             "evidence": {"gpus": [{"index": 0, "util_mean_percent": 90.0},
                                                   {"index": 1, "util_mean_percent": 0.0}]}})
    assert headline.why_no_gpu(nvml) == "NVML sees 2 GPU(s); TensorFlow's CUDA did not start"
    with_gpus = _report(physical_gpus=[{"name": "/physical_device:GPU:0"}])
    assert headline.devices_line(with_gpus) == "devices: 1 GPU(s) seen by TensorFlow"


def test_the_sample_runs_verdicts() -> None:
    for command in ("env", "placement", "memory", "scaling", "monitor", "run"):
        lines = headline.terminal(_sample(command), "r/report.md", "runs")
        assert 3 <= len(_entries(lines)) <= 6 and all(len(ln) < 80 for ln in lines), lines
        assert "passed" not in " ".join(lines)
        assert not any(ln.endswith(("...", "\u2026")) for ln in lines), lines
    assert headline.devices_line(_sample("scaling")) == \
        "devices: no GPU, ran on the CPU (4 virtual CPU devices): no NVIDIA driver"
    card = headline.card(_sample("run"))
    assert len(card.splitlines()) <= 5


def test_a_page_gets_the_verdict_entries_whole() -> None:
    """The dashboard wraps its lines: the same entries as the terminal's, one line each."""
    for command in ("env", "placement", "memory", "scaling", "monitor", "run"):
        report = _sample(command)
        short, whole = headline.verdict(report), headline.verdict(report, headline.UNCUT)
        assert [" ".join(e.replace("; fix", " fix").split()) for e in whole] == \
            [" ".join(e.split()) for e in _entries(short)]
    run = headline.verdict(_sample("run"))
    assert run[2] == "bottleneck: none stands out of a 5.98 ms step (compute 68%, host 31%,"\
        " launch" and run[3] == "  30%)", run  # wrapped with an indent, not cut


def _bottleneck(**finding: Any) -> dict[str, Any]:
    f = {"id": "run.bottleneck", "status": "warn", "message": "m", "advice": "",
         "evidence": {"causes": ["input-bound"], "shares": {"input": 0.47},
                      "step_s": 0.0326}, **finding}
    return {"command": "run", "findings": [f], "devices": {}, "data": {}}


def test_the_fix_is_the_bottleneck_findings_first_action_with_its_prediction() -> None:
    report = _bottleneck(
        title="input-bound: 47 % of a 32.6 ms step waits for tf.data",
        actions=[{"what": "pass num_parallel_calls=tf.data.AUTOTUNE to Dataset.map",
                  "where": "train.py:33",
                  "predicted": {"step_s": 0.0174, "low_s": 0.0169, "high_s": 0.018,
                                "basis": "parallel map", "from_s": 0.0326}},
                 {"what": "end the pipeline with .prefetch(tf.data.AUTOTUNE)",
                  "where": "train.py:34", "predicted": None}])
    lines = headline.verdict(report)
    assert lines[1:] == [
        "bottleneck: input-bound: 47 % of a 32.6 ms step waits for tf.data",
        "  fix at train.py:33: pass num_parallel_calls=tf.data.AUTOTUNE to Dataset.map;",
        "    predicted 32.6 -> 17.4 ms a step (16.9-18.0); 1 more in report.md"], lines
    # no prediction: its reason, not a number
    report["findings"][0]["actions"][0]["predicted"] = {"step_s": None,
                                                        "basis": "no complete step"}
    assert headline.bottleneck_line(report).endswith(
        "to Dataset.map; no prediction: no complete step; 1 more in report.md")
    # a report written before actions: the clause of the advice that names the line
    old = _bottleneck(advice="tf.data's time goes to MapAndBatch; Dataset.map(f) at "
                             "train.py:33 (`ds = ds.map(f)`) runs one element at a time: "
                             "pass num_parallel_calls=tf.data.AUTOTUNE; no prefetch")
    assert headline.bottleneck_line(old) == (
        "bottleneck: input-bound (47% of a 32.6 ms step); fix at train.py:33: "
        "Dataset.map(f) runs one element at a time: pass num_parallel_calls="
        "tf.data.AUTOTUNE")


def _diff(ratio: float, low: float | None, high: float | None, verdict: str,
          a_s: float = 0.027, b_s: float = 0.01015) -> dict[str, Any]:
    ev = {"name_a": "Model.fit", "name_b": "Model.fit", "ratio": ratio, "ratio_low": low,
          "ratio_high": high, "verdict": verdict, "a": {"median_s": a_s, "steps": 90},
          "b": {"median_s": b_s, "steps": 90}}
    return {"command": "diff", "data": {}, "devices": {}, "findings": [
        {"id": "diff.step-time.model.fit", "status": "ok", "message": "m", "evidence": ev},
        {"id": "diff.learning", "status": "ok", "message": "the model learns the same"}]}


def test_diffs_result_comes_first_said_the_right_way_round() -> None:
    faster = headline.terminal(_diff(0.376, 0.366, 0.386, "faster"), "r.md", "runs")
    assert faster[0] == "B is 2.66x faster (95 % CI 2.59-2.73): 27.0 -> 10.1 ms a step"
    assert faster[1].startswith("gpudiag diff: ") and len(_entries(faster)) <= 6
    slower = headline.verdict(_diff(1.5, 1.4, 1.6, "slower", 0.01, 0.015))
    assert slower[0] == "B is 1.50x slower (95 % CI 1.40-1.60): 10.0 -> 15.0 ms a step"
    same = headline.verdict(_diff(0.99, 0.97, 1.02, "no change", 0.01, 0.0099))[0]
    assert same.startswith("no change: B/A 0.99 (95 % CI 0.97-1.02 holds 1.00)"), same
    unknown = headline.verdict(_diff(0.5, None, None, "unknown", 0.01, 0.005))[0]
    assert unknown.startswith("cannot tell: too few steps"), unknown
    for lines in (faster, slower, [same, unknown]):
        assert not any("x0." in ln for ln in lines), lines


def _render(renderable_or_report: Any, width: int = 80) -> list[str]:
    out = StringIO()
    console = Console(file=out, width=width, color_system=None)
    if isinstance(renderable_or_report, Report):
        render_table(renderable_or_report, console)
    else:
        console.print(renderable_or_report)
    return out.getvalue().splitlines()


def test_findings_are_shown_whole_worst_first_wrapped_under_80_columns() -> None:
    report = Report("scaling", "x")
    long_id = "scaling.devices-worked.mirrored-4dev"
    message = "every device did work " * 10
    report.add(Finding(long_id, "ok", message))
    report.add(Finding("scaling.efficiency.towers", "warn", "x1.68 on 4 devices",
                       title="x1.68 on 4 devices: 42 % of linear"))
    lines = _render(report)
    assert lines[0].split()[:2] == ["WARN", "scaling.efficiency.towers:"]
    assert lines[0].endswith("x1.68 on 4 devices: 42 % of linear")  # the title, not the message
    assert lines[1].split()[:2] == ["OK", f"{long_id}:"]
    assert all(len(ln) < 80 and not ln.endswith("...") for ln in lines), lines
    assert all(ln.startswith(" " * 6) for ln in lines[2:]), lines  # wrapped, hanging
    assert " ".join(" ".join(lines[1:]).split()).endswith(" ".join(message.split()))


def test_scaling_table_fits_80_columns_without_cutting() -> None:
    data = _sample("scaling")["data"]["scaling"]
    lines = _render(rich_table(data["rows"], data["configs"]))
    assert all(len(ln) <= 80 for ln in lines), lines
    assert all(h in lines[1] for h in TERMINAL_HEADERS), lines[1]
    assert not any("…" in ln for ln in lines), lines
    assert len(lines) == 3 + len(data["rows"])


def test_a_fix_with_no_line_of_the_users_is_the_advices_first_sentence() -> None:
    """The sample scaling run (written before actions): its communication-bound
    configuration's advice, and its prediction said by throughput (a 2x batch's step is
    another step: never '14.1 -> 25.4 ms')."""
    line = headline.bottleneck_line(_sample("scaling"))
    assert line == ("bottleneck: communication-bound (20% of a 14.1 ms step); fix: fewer, "
                    "larger all-reduces: a larger batch per replica, or fewer replicas for a "
                    "model this size; predicted x1.11 examples/s (batch per replica x2)"), line


def _crashed() -> dict[str, Any]:
    """A program that crashed: its command failed with it, nothing was measured."""
    return {"command": "run", "devices": {}, "data": {}, "findings": [
        {"id": "run.command", "status": "fail", "message": "the program exited 1"},
        {"id": "run.bottleneck", "status": "skip", "message": "no step measured",
         "title": "no step measured"},
        {"id": "run.learning", "status": "warn", "message": "m", "title": "not falling"},
        {"id": "run.crash", "status": "fail", "message": "ValueError in f() at train.py:12",
         "title": "crash: ValueError at train.py:12 (tf-keras-fit-not-positive)",
         "actions": [{"what": "drop workers= from Model.fit", "where": "train.py:12",
                      "predicted": None}]}]}


def test_a_crash_is_the_verdicts_first_entry_with_its_fix() -> None:
    """The terminal's last lines, the Text card and the pages (the notebook's summary, the
    tab, MCP: headline.verdict) all open on the crash, not on "2 failed (...)"."""
    lines = headline.terminal(_crashed(), "r/report.md", "runs")
    assert _entries(lines)[0] == ("crash: ValueError at train.py:12 "
                                  "(tf-keras-fit-not-positive) fix at train.py:12: drop "
                                  "workers= from Model.fit"), lines
    assert len(_entries(lines)) <= 6 and all(len(ln) < 80 for ln in lines), lines
    assert headline.verdict(_crashed(), headline.UNCUT)[0].startswith(
        "crash: ValueError at train.py:12 (tf-keras-fit-not-positive); fix at train.py:12")
    assert headline.card(_crashed()).startswith("crash: ValueError at train.py:12")
    counts = next(ln for ln in headline.verdict(_crashed()) if ln.startswith("gpudiag run"))
    assert counts.startswith("gpudiag run: 2 failed (run.crash and 1 more)"), counts
    # a signal is a crash too, said in its own words; no crash: no such entry
    killed = _crashed()
    killed["findings"][3] = {"id": "run.crash", "status": "fail", "message": "m",
                             "title": "killed by signal 9 with no Python exception"}
    assert headline.verdict(killed)[0] == "crash: killed by signal 9 with no Python exception"
    killed["findings"][3]["status"] = "ok"
    assert not any(ln.startswith("crash") for ln in headline.verdict(killed))


def test_counts_read_as_english() -> None:
    """"1 warning", never "1 warnings": the verdict's counts and the findings' own."""
    one = _crashed()
    one["findings"][0]["status"] = "ok"
    counts = next(ln for ln in headline.verdict(one) if ln.startswith("gpudiag run"))
    assert counts == "gpudiag run: 1 failed (run.crash), 1 warning, 1 not checked, 1 ok"
    assert counted(1, "warning") == "1 warning" and counted(2, "warning") == "2 warnings"
    assert counted(3, "batch") == "3 batches" and counted(0, "step") == "0 steps"
    assert counted("?", "step") == "? steps"


def test_several_traces_close_on_the_worst_traces_answer() -> None:
    """`explain` over several traces, each a warn: the verdict names the trace whose step
    has the most not computed (host-bound at 10 % compute), not the first one read."""
    def trace(n: int, cause: str, compute: float) -> dict[str, Any]:
        return {"id": f"explain.bottleneck.t{n}", "status": "warn", "message": "m",
                "title": f"{cause}: trace {n}",
                "evidence": {"causes": [cause], "shares": {"compute": compute}}}

    report = {"command": "explain", "devices": {}, "data": {}, "findings": [
        trace(1, "launch-bound", 0.44), trace(2, "gpu-bound", 0.90),
        trace(3, "host-bound", 0.10), trace(4, "input-bound", 0.35),
        {"id": "explain.bottleneck.t5", "status": "warn", "message": "no GPU kernels",
         "title": "no GPU kernels: trace 5", "evidence": {"causes": ["no-gpu-kernels"]}}]}
    assert headline.bottleneck_line(report) == "bottleneck: host-bound: trace 3; fix: see report.md"
    report["findings"][1]["status"] = "fail"  # a worse status comes first still
    assert headline.bottleneck_line(report) == "bottleneck: gpu-bound: trace 2; fix: see report.md"


def test_the_bottlenecks_step_is_named_the_windows_beside_the_loops_steady_step() -> None:
    """One step per loop: the steady median with its interval (run.throughput) is the
    loop's step; the bottleneck's "of a 5.65 ms step" is said to be the profiled window's."""
    report = _bottleneck(title="input-bound: 69 % of a 5.65 ms step waits for input",
                         message="Model.fit: 5.65 ms per step over 5 profiled step(s)")
    report["findings"].append({
        "id": "run.throughput", "status": "ok", "message": "m", "evidence": {"loops": [
            {"series": "tf.function step", "step_s_median": 0.009, "timed_steps": 50},
            {"series": "Model.fit", "step_s_median": 0.00485, "step_s_low": 0.0048,
             "step_s_high": 0.0049, "timed_steps": 101}]}})
    assert headline.bottleneck_line(report) == (
        "bottleneck: input-bound: 69 % of a 5.65 ms step waits for input (a step of the "
        "profiled window; the loop's step: 4.85 ms, 95 % CI 4.80-4.90, median of 101 steps); "
        "fix: see report.md")
    report["findings"][1]["evidence"]["loops"][1]["series"] = "another"  # no such loop
    assert headline.bottleneck_line(report) == \
        "bottleneck: input-bound: 69 % of a 5.65 ms step waits for input; fix: see report.md"


def test_a_diffs_verdict_says_whether_the_prediction_held() -> None:
    """In the bottleneck entry of `gpudiag diff`'s verdict, not only in the long message."""
    report = _diff(0.0184, 0.018, 0.019, "faster", 0.2233, 0.00411)
    report["findings"].append({
        "id": "diff.bottleneck.run.bottleneck", "status": "ok", "message": "m",
        "title": "input-bound fixed: profiled step 223 ms -> 5.90 ms; prediction held",
        "evidence": {"predicted_step_s": 0.0059, "measured_step_s": 0.00411,
                     "predicted_low_s": 0.0038, "predicted_high_s": 0.0072, "inside": True}})
    assert headline.bottleneck_line(report) == (
        "bottleneck: input-bound fixed: profiled step 223 ms -> 5.90 ms; the prediction "
        "held: B's "
        "median step 4.11 ms is inside the predicted 3.80-7.20 ms (predicted 5.90)")
    report["findings"][-1]["evidence"].update(predicted_low_s=0.005, inside=False)
    assert headline.bottleneck_line(report).endswith(
        "the prediction did not hold: B's median step 4.11 ms is under the predicted "
        "5.00-7.20 ms (better than predicted 5.90)")
    assert all(len(ln) < 80 for ln in headline.terminal(report, "r.md", "runs"))


def test_the_runs_prediction_is_made_once_on_the_loops_step_and_every_face_says_it() -> None:
    """One prediction per fix: where the run timed its loop, the verdict moves the fix's
    prediction onto the loop's step (the steady median), scaled from the window's step it
    was made from, as `gpudiag diff` scales the one it holds B to; the terminal, report.md
    and the tab's action say that one."""
    f = Finding("run.bottleneck", "warn", "Model.fit: 5.65 ms per step over 5 profiled step(s)",
                {"causes": ["input-bound"], "shares": {"input": 0.69}, "step_s": 0.00565},
                title="input-bound: 69 % of a 5.65 ms step waits for input",
                actions=(Action("pass num_parallel_calls=tf.data.AUTOTUNE to Dataset.map",
                                "train.py:24",
                                Prediction(0.00226, 0.00113, 0.00339, "parallel map", 0.00565)),))
    timed = {"loops": [{"series": "Model.fit", "step_s_median": 0.00485, "timed_steps": 101}]}
    for loops, said in (({"loops": []}, "predicted 5.65 -> 2.26 ms a step (1.13-3.39)"),
                        (timed, "predicted 4.85 -> 1.94 ms a step (0.970-2.91)")):  # x 4.85/5.65
        report = Report("run", "runs/x")
        report.add(on_loop(f, loop_of(f.message, loops)))
        report.add(Finding("run.throughput", "ok", "m", loops))
        data = report.to_dict()
        assert headline.bottleneck_line(data).endswith(said), (said, data)
        assert (f"- at `train.py:24`: pass num_parallel_calls=tf.data.AUTOTUNE to "
                f"Dataset.map; {said} (parallel map)") in to_markdown(report).splitlines()
        assert action_said(data["findings"][0]["actions"][0]).endswith(said)


def test_a_debugging_switch_left_on_is_the_bottleneck_where_no_step_was_measured() -> None:
    """A Keras fit under `tf.config.run_functions_eagerly(True)`: its trace holds no
    complete step, and the switch (run.debug-mode) is what the verdict names, with its fix."""
    skip = {"id": "run.bottleneck", "status": "skip",
            "message": "the trace holds no complete step", "evidence": {}}
    switch = {"id": "run.debug-mode", "status": "warn", "evidence": {},
              "title": "run_functions_eagerly(True) at train.py:6: every tf.function ran "
                       "eagerly",
              "actions": [{"what": "remove tf.config.run_functions_eagerly(True)",
                           "where": "train.py:6", "predicted": None}]}
    report = {"command": "run", "findings": [skip, switch], "data": {}}
    assert headline.bottleneck_entry(report) == (
        "bottleneck: run_functions_eagerly(True) at train.py:6: every tf.function ran "
        "eagerly", "fix at train.py:6: remove tf.config.run_functions_eagerly(True)")
    switch["status"] = "ok"  # turned off again: the skip stands
    assert headline.bottleneck_entry(report) == (
        "bottleneck: not measured: the trace holds no complete step",)
