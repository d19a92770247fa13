"""The short verdict: what a command found, in at most six lines under 80 columns.

One source for the three places a person meets it: the last lines of every command in the
terminal (gpudiag.execute), the Text tab's first card (the same lines less the dashboard's,
five at most) and the GPUDIAG dashboard's header (gpudiag.tbplugin). Pure: a report as
plain data (report.json's content) in, lines out.

The lines, each only where the report has its evidence:

    gpudiag run: 1 failed (run.learning), 3 warnings, 5 skipped, 11 ok
    devices: no GPU, ran on the CPU (/device:CPU:0): no NVIDIA driver
    bottleneck: input-bound 41% of the step; fix at train.py:31 (report.md)
    learning: Model.fit: loss 2.7221 -> 0.0127 over 120 steps, accuracy 1.000
    report: runs/2026-11-25T10-00-00-run/report.md
    dashboard: gpudiag tensorboard runs

"No GPU" is decided from what TensorFlow listed (``physical_gpus``, a process's ``gpus``),
never from a missing line; its reason only from recorded evidence: CUDA_VISIBLE_DEVICES as
the process had it, TensorFlow's build (``is_built_with_cuda``), the NVML library and
TensorFlow's own "Could not find cuda drivers" line (gpudiag.catalogue). Without such
evidence the line says the reason is not known.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

WIDTH = 79  # a line of the verdict is shorter than an 80-column terminal
UNCUT = 100_000  # a web page's lines: wrapped by the page, never cut
_FILE_LINE = re.compile(r"[\w./-]+\.py:\d+")
_WORST = {"fail": 0, "warn": 1, "skip": 2, "ok": 3}


def _walk(node: Any, key: str) -> Iterator[Any]:
    """Every value stored under ``key`` anywhere in ``node`` (dicts and lists)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key:
                yield v
            yield from _walk(v, key)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v, key)


def clip(text: str, width: int = WIDTH) -> str:
    """``text`` on one line of at most ``width`` characters, cut at a word with '...'."""
    one = " ".join(text.split())
    if len(one) <= width:
        return one
    cut = one[: width - 3].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + "..."


def tf_gpus(report: dict[str, Any]) -> list[str] | None:
    """The GPUs TensorFlow listed, from any probe or process of the report (None: no
    record of what TensorFlow listed)."""
    lists = [v for v in _walk(report.get("devices", {}), "physical_gpus") if isinstance(v, list)]
    for f in report.get("findings", []):
        lists += [v for v in _walk(f.get("evidence", {}), "physical_gpus")
                  if isinstance(v, list)]
        devices = f.get("evidence", {}).get("devices")
        if isinstance(devices, dict) and isinstance(devices.get("gpus"), list):
            lists.append(devices["gpus"])
    lists += [v for v in _walk(report.get("data", {}), "physical_gpus") if isinstance(v, list)]
    if not lists:
        return None
    seen: list[str] = []
    for gpus in lists:
        for g in gpus:
            name = g.get("name") if isinstance(g, dict) else str(g)
            if name and name not in seen:
                seen.append(str(name))
    return seen


def why_no_gpu(report: dict[str, Any]) -> str:
    """Why TensorFlow listed no GPU, from the recorded evidence only."""
    reasons: list[str] = []
    for key in ("CUDA_VISIBLE_DEVICES", "cuda_visible_devices"):
        for value in _walk(report, key):
            if isinstance(value, str) and not re.search(r"\d|GPU-|MIG-", value.replace(
                    "-1", "")):
                reasons.append(f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU")
                break
    builds = [v for k in ("is_built_with_cuda", "cuda_build") for v in _walk(report, k)]
    if False in builds and True not in builds:
        reasons.append("TensorFlow is a CPU-only build")
    texts = [str(v) for k in ("nvml_unavailable_reason", "reason") for v in _walk(report, k)]
    catalogue = [m for v in _walk(report, "catalogue_matches") if isinstance(v, list) for m in v]
    catalogue += [v for v in _walk(report, "id") if v == "cuda-drivers-missing"]
    nvml = max((len(v) for k in ("nvml_gpus", "gpus") for v in _walk(report, k)
                if isinstance(v, list) and v and all(isinstance(g, dict) and "util_mean_percent"
                                                     in g for g in v)), default=0)
    if nvml:  # the driver answers NVML: TensorFlow's CUDA is what did not start
        reasons.append(f"NVML sees {nvml} GPU(s); TensorFlow's CUDA did not start")
    elif any("no NVIDIA driver" in t for t in texts) or "cuda-drivers-missing" in catalogue:
        reasons.append("no NVIDIA driver")
    if not reasons:
        return "why: see gpudiag env"  # fits the 80 columns after the CPU devices
    return "; ".join(dict.fromkeys(reasons))


def _cpu_devices(report: dict[str, Any]) -> str:
    """Where the work ran instead: the virtual CPU devices, the devices ops ran on, or
    the logical devices TensorFlow listed."""
    devices = report.get("devices", {})
    if devices.get("kind") == "virtual-cpu":
        return f" ({len(devices.get('compute_devices', []))} virtual CPU devices)"
    used: list[str] = []
    for v in _walk(report.get("findings", []), "ops_by_device"):
        if isinstance(v, dict):
            used += [d for d in v if d not in used]
    if not used:
        logical = devices.get("logical_devices") or []
        used = [str(d.get("name") if isinstance(d, dict) else d) for d in logical]
    return f" ({', '.join(used)})" if used else ""


def devices_line(report: dict[str, Any], width: int = WIDTH) -> str | None:
    """Devices seen and used; for no GPU, that the work ran on the CPU and why (one line
    of at most ``width`` characters)."""
    gpus = tf_gpus(report)
    if gpus is None and any(_walk(report, "nvml_unavailable_reason")):
        return clip(f"devices: NVML sees no GPU: {why_no_gpu(report)}", width)
    if gpus is None:
        summary = report.get("devices", {}).get("summary")
        return clip(f"devices: {summary}", width) if summary else None
    if not gpus:
        return clip(f"devices: no GPU, ran on the CPU{_cpu_devices(report)}: "
                    f"{why_no_gpu(report)}", width)
    used = next((f for f in _by_suffix(report, ("every-device-used", "every-gpu-used"))), None)
    tail = f"; {used['message']}" if used else ""
    return clip(f"devices: {len(gpus)} GPU(s) seen by TensorFlow{tail}", width)


def _by_suffix(report: dict[str, Any], suffixes: tuple[str, ...]) -> list[dict[str, Any]]:
    """Findings whose id ends with or contains one of ``suffixes``, worst first."""
    found = [f for f in report.get("findings", [])
             if any(f["id"].endswith(s) or f".{s}." in f"{f['id']}." for s in suffixes)]
    return sorted(found, key=lambda f: _WORST.get(f["status"], 4))


def bottleneck_line(report: dict[str, Any], width: int = WIDTH) -> str | None:
    """The named cause, its share of the step, and the fix's line of the user's code."""
    found = _by_suffix(report, ("bottleneck",))
    if not found:
        return None
    f = found[0]
    ev = f.get("evidence", {})
    if f["status"] == "skip":
        return clip(f"bottleneck: not measured: {f['message']}", width)
    if f["id"].startswith("diff."):  # gpudiag diff's: before and after, in its own words
        return clip(f"bottleneck: {f['message'].split(': ', 1)[-1]}", width)
    causes = ev.get("causes") or []
    if ev.get("shared_cores"):  # virtual CPU devices: not the user's GPUs' bottleneck
        what = causes[0] if causes else "none stands out"
        return clip(f"bottleneck: {what}, of virtual CPUs sharing cores: not your GPUs",
                    width)
    shares = ev.get("shares") or {}
    step = ev.get("step_s")
    per = f" of a {step * 1000:.1f} ms step" if isinstance(step, int | float) else ""
    if not causes:
        parts = ", ".join(f"{k} {v:.0%}" for k, v in shares.items()
                          if k != "host_between_calls" and isinstance(v, int | float)
                          and v >= 0.05)
        return clip(f"bottleneck: none stands out{per} ({parts})", width)
    where = _FILE_LINE.search(f.get("advice", ""))
    fix = f"; fix at {where.group(0)}" if where else "; fix: see report.md"
    part = {"input-bound": "input", "communication-bound": "communication",
            "host-bound": "host_between_calls"}.get(causes[0])
    share = shares.get(part) if part else None
    per = f" ({share:.0%}{per})" if isinstance(share, int | float) else f" ({per[1:]})" \
        if per else ""
    return clip(f"bottleneck: {causes[0]}{per}{fix}", width)


def learning_line(report: dict[str, Any], width: int = WIDTH) -> str | None:
    found = _by_suffix(report, ("learning",))
    if not found:
        return None
    f = found[0]
    word = {"ok": "", "warn": "WARN ", "fail": "FAIL ", "skip": "not judged: "}[f["status"]]
    return clip(f"learning: {word}{f['message']}", width)


def counts_line(report: dict[str, Any], width: int = WIDTH) -> str:
    findings = report.get("findings", [])
    n = {s: sum(1 for f in findings if f["status"] == s) for s in _WORST}
    failed = [f["id"] for f in findings if f["status"] == "fail"]
    head = f"gpudiag {report.get('command', '?')}"
    if report.get("partial"):
        head += " (interrupted)" if report.get("interrupted") else " (partial)"
    first = f" ({failed[0]}{', ...' if len(failed) > 1 else ''})" if failed else ""
    return clip(f"{head}: {n['fail']} failed{first}, {n['warn']} warnings, "
                f"{n['skip']} not checked, {n['ok']} ok", width)


def verdict(report: dict[str, Any], width: int = WIDTH) -> list[str]:
    """The verdict's first four lines at most: the counts, devices, bottleneck, learning,
    each of at most ``width`` characters (a page wraps them: ``UNCUT``)."""
    lines = [counts_line(report, width), devices_line(report, width),
             bottleneck_line(report, width), learning_line(report, width)]
    return [ln for ln in lines if ln]


def terminal(report: dict[str, Any], report_md: str, logdir: str) -> list[str]:
    """What a command prints last: the verdict, where the report and the dashboard are."""
    return [*verdict(report), f"report: {report_md}", f"dashboard: gpudiag tensorboard {logdir}"]


def card(report: dict[str, Any]) -> str:
    """The Text tab's first card (markdown, five lines at most): the verdict and the report."""
    lines = [*verdict(report), f"report: {report.get('run_dir', '')}/report.md"]
    return "  \n".join(_md_escape(ln) for ln in lines)


def _md_escape(line: str) -> str:
    return re.sub(r"([*_`\[\]<>])", r"\\\1", line)
