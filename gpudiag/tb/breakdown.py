"""Where each step's time goes, as a picture: a stacked bar per device (run, explain) or
per configuration and device (scaling), and the bottleneck findings as the Text tab's
first card. Parent side: matplotlib (Agg), no TensorFlow.

The numbers are the bottleneck findings' own evidence (``parts_s``: each device's mean
profiled step, in seconds, from gpudiag.verdicts.bottleneck), so the picture shows
exactly what the report says. A finding is a bottleneck finding when its id has a
``bottleneck`` part (``run.bottleneck``, ``run.bottleneck.p2``, ``explain.bottleneck.<host>``,
``scaling.bottleneck.<config>``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpudiag.layout.evidence import STEP_PARTS
from gpudiag.report import Finding

PARTS = STEP_PARTS  # bottom to top, as added (declared once in gpudiag.layout.evidence)
COLOURS = {"compute": "#2e7d32", "communication": "#6a1b9a", "copy": "#8d6e63",
           "input": "#ef6c00",
           "host": "#1565c0", "idle": "#bdbdbd"}
MARK = "bottleneck"


@dataclass(frozen=True)
class Bar:
    label: str  # "towers-2dev CPU:1", "GPU:3", "p2 CPU:0"
    parts_ms: dict[str, float]  # PARTS -> ms of the mean step
    period_ms: float


def is_bottleneck(f: Finding) -> bool:
    return MARK in f.id.split(".")


def _device(name: str) -> str:
    return name.removeprefix("/device:").replace("/host:CPU", "host CPU")


def bars(findings: Sequence[Finding]) -> list[Bar]:
    """A bar per device of every bottleneck finding with a breakdown, in report order."""
    out = []
    for f in findings:
        if not is_bottleneck(f):
            continue
        head = f.id.split(MARK, 1)[1].lstrip(".")
        for device, parts in (f.evidence.get("parts_s") or {}).items():
            label = f"{head} {_device(device)}".strip()
            out.append(Bar(label, {k: parts.get(f"{k}_s", 0.0) * 1e3 for k in PARTS},
                           parts["period_s"] * 1e3))
    return out


def preload() -> None:
    """Import matplotlib (Agg) ahead of ``png``: `run` calls it from its live thread while
    the program runs, so that after the program's end the picture costs its drawing
    only (the import is about half a second of CPU)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot


def png(rows: Sequence[Bar], path: Path) -> tuple[int, int]:
    """Two panels, one row per bar, top to bottom in order: each step's parts as shares of
    its period (bars of equal length, comparable at a glance) and in ms (steps of
    different lengths side by side: the speed-up lost between configurations). Saved as
    a PNG at ``path``; returns (width, height)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (share_ax, ms_ax) = plt.subplots(1, 2, figsize=(11, 1.8 + 0.38 * len(rows)),
                                          dpi=100, sharey=True, layout="constrained")
    y = list(range(len(rows)))[::-1]
    for ax, scale in ((share_ax, "share"), (ms_ax, "ms")):
        left = [0.0] * len(rows)
        for part in PARTS:
            widths = [r.parts_ms[part] * (100 / r.period_ms if scale == "share" and
                                          r.period_ms > 0 else 1) for r in rows]
            ax.barh(y, widths, left=left, color=COLOURS[part], height=0.7,
                    label=part if scale == "share" else None)
            left = [a + b for a, b in zip(left, widths, strict=True)]
    longest = max((r.period_ms for r in rows), default=0.0)
    for yy, r in zip(y, rows, strict=True):
        ms_ax.text(r.period_ms + longest * 0.01, yy, f"{r.period_ms:.2f}", va="center",
                   fontsize=8)
    share_ax.set_yticks(y, [r.label for r in rows], fontsize=8)
    share_ax.set_xlim(0, 100)
    share_ax.set_xlabel("% of the step")
    ms_ax.set_xlim(0, longest * 1.15 or 1.0)
    ms_ax.set_xlabel("ms per step (mean of the profiled steps)")
    fig.suptitle("where each step's time goes")
    fig.legend(loc="outside lower center", ncol=len(PARTS), fontsize=8, frameon=False)
    fig.savefig(path, format="png")
    width, height = (int(v) for v in fig.canvas.get_width_height())
    plt.close(fig)
    return width, height


def text(findings: Sequence[Finding]) -> str:
    """The bottleneck findings as markdown: each with its status, message and fix."""
    lines = []
    for f in findings:
        if not is_bottleneck(f):
            continue
        lines.append(f"- **{f.status.upper()}** `{f.id}`: {f.message}")
        if f.advice:
            lines.append(f"  - fix: {f.advice}")
    return "\n".join(lines)
