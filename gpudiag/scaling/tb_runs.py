"""The parent's TensorBoard runs of `gpudiag scaling` and its plot (names: gpudiag.layout).

- ``allreduce/``: bus bandwidth, algorithm bandwidth (GB/s) and time (ms) per message
  size, step = the size in MiB; the table as text.
- ``scaling/``: examples/s and efficiency per strategy, step = the device count; the
  scaling table as text; the plot as an image.
- ``scaling.png``: throughput (with the linear ideal, dotted) and efficiency against the
  device count; on shared (virtual) devices the efficiency panel says it is not
  meaningful.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpudiag import layout
from gpudiag.markdown import markdown_table
from gpudiag.probes.records import MIB, AllreduceResult
from gpudiag.scaling.table import TABLE_HEADERS
from gpudiag.tb import EventWriter
from gpudiag.verdicts.scaling import SHARED_DEVICE_KINDS

ALLREDUCE_HEADERS = ["size (MiB)", "time (ms)", "algbw (GB/s)", "busbw (GB/s)", "iterations"]


def write_allreduce_tb(tb_dir: Path, result: AllreduceResult) -> None:
    """The ``allreduce/`` run (nothing with one device: no rows)."""
    if not result.rows:
        return
    with EventWriter(tb_dir) as w:
        for r in result.rows:
            step = max(1, r.size_bytes // MIB)
            w.scalar(layout.TAG_ALLREDUCE_BUSBW, r.busbw_bytes_per_s / 1e9, step)
            w.scalar(layout.TAG_ALLREDUCE_ALGBW, r.algbw_bytes_per_s / 1e9, step)
            w.scalar(layout.TAG_ALLREDUCE_TIME, r.time_s * 1e3, step)
        w.text(layout.TAG_ALLREDUCE_TABLE, markdown_table(ALLREDUCE_HEADERS, [
            [f"{r.size_bytes / MIB:g}", f"{r.time_s * 1e3:.3f}",
             f"{r.algbw_bytes_per_s / 1e9:.2f}", f"{r.busbw_bytes_per_s / 1e9:.2f}", r.iters]
            for r in result.rows]))


def plot_png(rows: Sequence[dict[str, Any]], kind: str, path: Path) -> tuple[int, int]:
    """Throughput and efficiency against the device count; returns (width, height)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6), dpi=100)
    strategies = sorted({r["strategy"] for r in rows})
    counts = sorted({r["n_devices"] for r in rows})
    for s in strategies:
        mine = [r for r in rows if r["strategy"] == s and r.get("examples_per_s")]
        ax1.plot([r["n_devices"] for r in mine], [r["examples_per_s"] for r in mine],
                 marker="o", label=s)
        eff = [r for r in mine if r.get("efficiency") is not None]
        ax2.plot([r["n_devices"] for r in eff], [r["efficiency"] for r in eff], marker="o",
                 label=s)
        base = next((r["examples_per_s"] for r in mine if r["n_devices"] == 1), None)
        if base:
            ax1.plot(counts, [base * n for n in counts], linestyle=":", color="grey")
    ax1.set_xlabel("devices")
    ax1.set_ylabel("examples/s (median)")
    ax1.set_title("throughput (dotted: linear)")
    ax1.set_xticks(counts)
    ax1.legend()
    ax2.axhline(1.0, linestyle=":", color="grey")
    ax2.set_xlabel("devices")
    ax2.set_ylabel("efficiency")
    ax2.set_xticks(counts)
    ax2.set_ylim(0, 1.2)
    title = "scaling efficiency"
    if kind in SHARED_DEVICE_KINDS:
        title += f" ({kind}: not meaningful)"
    ax2.set_title(title)
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, format="png")
    width, height = (int(v) for v in fig.canvas.get_width_height())
    plt.close(fig)
    return width, height


def write_scaling_tb(run_dir: Path, rows: Sequence[dict[str, Any]],
                     table_rows: list[list[str]], kind: str) -> None:
    """The ``scaling/`` run and ``scaling.png`` (``rows``: verdicts.scaling_rows)."""
    png = run_dir / layout.PLOT_PNG
    with EventWriter(run_dir / layout.SCALING_TB_RUN) as w:
        for r in rows:
            if r.get("examples_per_s"):
                w.scalar(layout.scaling_examples_per_s_tag(r["strategy"]), r["examples_per_s"],
                         r["n_devices"])
            if r.get("efficiency") is not None:
                w.scalar(layout.scaling_efficiency_tag(r["strategy"]), r["efficiency"],
                         r["n_devices"])
        w.text(layout.TAG_SCALING_TABLE, markdown_table(TABLE_HEADERS, table_rows))
        if rows:
            width, height = plot_png(rows, kind, png)
            w.png(layout.TAG_SCALING_PLOT, png.read_bytes(), width, height)
