"""What a notebook shows after ``gpudiag.watch()``: the run's diagnosis, read back from
its run directory (gpudiag.rundir.load_run, the one reader of a run).

``Diagnosis`` has ``_repr_html_`` (the verdict, the devices, the step's parts on each device
as `run`'s breakdown picture, the bottleneck with its fix, the loss curve as inline SVG,
what the block could not see; every picture inline, nothing fetched from anywhere) and a
plain-text ``__str__`` / ``_repr_pretty_`` for a console. A notebook cell's file is the
kernel's name for it (``/tmp/ipykernel_<pid>/<hash>.py``); shown as IPython shows it in a
traceback, ``In[N]``, with the line, from the kernel's own map (``cell_numbers``).
"""

from __future__ import annotations

import base64
import contextlib
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudiag.layout import BREAKDOWN_PNG
from gpudiag.rundir.load import load_run
from gpudiag.rundir.records import RUNNING_MEAN, Run
from gpudiag.verdicts import headline

STATUS_COLOURS = {"ok": "#1b7f3b", "warn": "#a86400", "fail": "#b00020", "skip": "#666"}
SVG_W, SVG_H, PAD = 420, 150, 34


def cell_numbers() -> dict[str, int]:
    """The kernel's cells: file name -> execution count (IPython's compiler keeps the map
    its tracebacks use); empty outside IPython."""
    with contextlib.suppress(Exception):
        from IPython import get_ipython

        shell = get_ipython()
        found = getattr(getattr(shell, "compile", None), "_filename_map", None) or {}
        return {str(k): int(v) for k, v in found.items()}
    return {}


_IPYTHON_INPUT = re.compile(r"<ipython-input-(\d+)-[0-9a-f]+>:(\d+)")


def name_cells(text: str, cells: dict[str, int]) -> str:
    """``<hash>.py:12`` (a verdict names a file by its base name) -> ``In[3] line 12``;
    IPython's own ``<ipython-input-3-...>:12`` (Colab, a terminal IPython) too."""
    for path, number in cells.items():
        base = Path(path).name
        if base and base in text:
            text = re.sub(re.escape(base) + r":(\d+)", rf"In[{number}] line \1", text)
    return _IPYTHON_INPUT.sub(r"In[\1] line \2", text)


@dataclass(frozen=True)
class Diagnosis:
    """One watched block's diagnosis."""

    run: Run
    cells: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, run_dir: Path, cells: dict[str, int] | None = None) -> Diagnosis:
        return cls(load_run(run_dir), dict(cells or {}))

    @property
    def run_dir(self) -> Path:
        return self.run.path

    def finding(self, finding_id: str) -> dict[str, Any] | None:
        return self.run.finding(finding_id)

    @property
    def verdict(self) -> list[str]:
        """The verdict's lines, as the terminal ends `gpudiag run` (uncut)."""
        return [self._named(ln) for ln in headline.verdict(self.run.report_json,
                                                           width=headline.UNCUT)]

    @property
    def bottleneck(self) -> dict[str, Any] | None:
        """The run.bottleneck finding (its message and its advice: the fix, with the line)."""
        for f in self.run.report.findings:
            if f.id == "run.bottleneck" or f.id.startswith("run.bottleneck."):
                return f.to_dict()
        return None

    @property
    def fix(self) -> str | None:
        b = self.bottleneck
        return self._named(b["advice"]) if b and b.get("advice") else None

    @property
    def unseen(self) -> list[str]:
        """What the block could not see (run.notebook)."""
        f = self.finding("run.notebook")
        return list((f or {}).get("evidence", {}).get("unseen") or [])

    def loss_curve(self) -> tuple[str, list[tuple[int, float]]]:
        """The first loop with a loss: its name and (step, loss) points."""
        with contextlib.suppress(Exception):
            for name, loop in self.run.loops.items():
                points = sorted(loop.losses().items())
                if points:
                    return name, points
        return "", []

    def _named(self, text: str) -> str:
        return name_cells(text, self.cells)

    # ------------------------------------------------------------------ plain text

    def text(self) -> str:
        lines = [f"gpudiag: {self.run.path}", *self.verdict]
        fix = self.fix
        if fix:
            lines.append(f"fix: {fix}")
        name, points = self.loss_curve()
        if points:
            _epochs, running = self.run.loss_marks(name)
            lines.append(f"loss ({name}): {points[0][1]:.4g} at step {points[0][0]} -> "
                         f"{points[-1][1]:.4g} at step {points[-1][0]}"
                         + (f" ({RUNNING_MEAN})" if running else ""))
        lines.extend(f"not seen: {u}" for u in self.unseen)
        lines.append(f"report: {self.run.path / 'report.md'}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"<gpudiag Diagnosis of {self.run.path}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text())

    # ------------------------------------------------------------------ HTML

    def _repr_html_(self) -> str:
        e = html.escape
        parts = ['<div class="gpudiag" style="font-family:sans-serif;line-height:1.4">',
                 '<div style="font-weight:bold">gpudiag</div>',
                 '<ul style="margin:4px 0 8px 0">']
        parts += [f"<li>{e(ln)}</li>" for ln in self.verdict]
        parts.append("</ul>")
        b = self.bottleneck
        if b is not None:
            colour = STATUS_COLOURS.get(b["status"], "#000")
            parts.append(f'<div><b style="color:{colour}">bottleneck</b> '
                         f"{e(self._named(b['message']))}</div>")
            if self.fix:
                parts.append(f'<div style="margin:4px 0"><b>fix</b> {e(self.fix)}</div>')
        png = self.run.path / BREAKDOWN_PNG
        if png.is_file():
            data = base64.b64encode(png.read_bytes()).decode()
            parts.append('<div><b>each device\'s step</b><br>'
                         f'<img alt="step breakdown by device" src="data:image/png;base64,'
                         f'{data}" style="max-width:720px"></div>')
        name, points = self.loss_curve()
        if points:
            epochs, running = self.run.loss_marks(name)
            said = f"<br><small>{e(RUNNING_MEAN)}</small>" if running else ""
            parts.append(f"<div><b>loss</b> ({e(name)})<br>{loss_svg(points, epochs)}"
                         f"{said}</div>")
        if self.unseen:
            parts.append("<div><b>not seen</b><ul>")
            parts += [f"<li>{e(u)}</li>" for u in self.unseen]
            parts.append("</ul></div>")
        parts.append('<details><summary>every finding</summary><table>')
        for f in self.run.report.findings:
            colour = STATUS_COLOURS.get(f.status, "#000")
            parts.append(f'<tr><td style="color:{colour}">{e(f.status.upper())}</td>'
                         f"<td><code>{e(f.id)}</code></td>"
                         f"<td>{e(self._named(f.message))}</td></tr>")
        parts.append("</table></details>")
        parts.append(f"<div><small>report: <code>{e(str(self.run.path / 'report.md'))}"
                     "</code></small></div></div>")
        return "".join(parts)


def loss_svg(points: list[tuple[int, float]], epochs: Sequence[int] = ()) -> str:
    """The loss by step as an inline SVG polyline, with its first and last values and a
    dashed line at each step where an epoch began (``epochs``)."""
    steps = [s for s, _ in points]
    losses = [v for _, v in points]
    lo, hi = min(losses), max(losses)
    s0, s1 = steps[0], steps[-1]
    w, h = SVG_W - 2 * PAD, SVG_H - 2 * PAD

    def xy(step: int, value: float) -> str:
        x = PAD + (w * (step - s0) / (s1 - s0) if s1 > s0 else w / 2)
        y = PAD + (h * (hi - value) / (hi - lo) if hi > lo else h / 2)
        return f"{x:.1f},{y:.1f}"

    line = " ".join(xy(s, v) for s, v in points)
    marks = "".join(
        f'<line x1="{xy(s, hi).split(",")[0]}" y1="{PAD}" x2="{xy(s, hi).split(",")[0]}" '
        f'y2="{SVG_H - PAD}" stroke="#999" stroke-dasharray="2 3"><title>epoch begins at '
        f"step {s}</title></line>" for s in epochs if s0 <= s <= s1)
    return (f'<svg width="{SVG_W}" height="{SVG_H}" '
            f'role="img" aria-label="loss by step">'
            f'<rect x="{PAD}" y="{PAD}" width="{w}" height="{h}" fill="none" stroke="#ccc"/>'
            f"{marks}"
            f'<polyline points="{line}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>'
            f'<text x="{PAD}" y="{PAD - 6}" font-size="11">{hi:.4g}</text>'
            f'<text x="{PAD}" y="{SVG_H - PAD + 14}" font-size="11">{lo:.4g} '
            f"(steps {s0}-{s1})</text></svg>")


def show(diagnosis: Diagnosis) -> None:
    """Shown in the notebook (IPython's display: HTML and text), else printed."""
    try:
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is not None:
            display(diagnosis)
            return
    except ImportError:
        pass
    print(diagnosis.text())
