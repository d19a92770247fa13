"""The scaling table: one row per configuration, as cells, markdown (TensorBoard text,
written by judge.py and tb_runs.py) and a rich table on the console."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

TABLE_HEADERS = ["strategy", "devices", "examples/s", "speedup", "efficiency",
                 "per-device busy (trace)", "per-device util (NVML)"]


def _fmt(value: float | None, pattern: str) -> str:
    return "n/a" if value is None else pattern.format(value)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def table(rows: Sequence[dict[str, Any]], configs: dict[str, Any]) -> list[list[str]]:
    """The cells: ``rows`` are verdicts.scaling_rows, ``configs`` the report's per-
    configuration data (for its NVML summaries)."""
    out = []
    for r in rows:
        cfg = configs.get(r["name"], {})
        busy = r.get("trace_busy_fraction") or {}
        util = "n/a"
        nv = cfg.get("nvml")
        if nv:
            util = " ".join(f"{s['util_mean_percent']:.0f}%" if s.get("util_mean_percent")
                            is not None else "?" for s in nv["summaries"])
        out.append([
            r["strategy"], str(r["n_devices"]), _fmt(r.get("examples_per_s"), "{:,.0f}"),
            _fmt(r.get("speedup"), "x{:.2f}"), _fmt(r.get("efficiency"), "{:.2f}"),
            " ".join(_pct(busy[d]) for d in sorted(busy)) or "n/a", util,
        ])
    return out


#: The terminal's headers: the same columns, named short enough for 80 columns.
TERMINAL_HEADERS = ["strategy", "dev", "examples/s", "speedup", "eff.",
                    "busy (trace)", "util (NVML)"]


def rich_table(rows: Sequence[dict[str, Any]], configs: dict[str, Any]) -> Any:
    """The table as a rich Table, for the console: one line per configuration, under 80
    columns for up to 4 devices (each configuration's detail: report.md, the dashboard)."""
    from rich import box
    from rich.table import Table

    t = Table(title="scaling (efficiency = throughput(n) / (n x throughput(1)))",
              box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1),
              collapse_padding=True)
    for h in TERMINAL_HEADERS:
        t.add_column(h, no_wrap=True, min_width=len(h))
    for cells in table(rows, configs):
        t.add_row(*cells)
    return t
