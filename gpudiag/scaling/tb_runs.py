"""What `gpudiag scaling`'s parent writes for TensorBoard (names: gpudiag.layout).

Into each configuration's run (``<strategy>-<n>dev/``, beside the child's events):

- the report's figures for that configuration (``layout.BY_CONFIG`` tags: median
  examples/s, speedup, efficiency, final loss and accuracy, each device's busy share of
  the profiled window, each GPU's mean NVML utilization), each written at the first and
  at the last training step: a Time Series card shows every configuration's figure as
  a level line, towers and mirrored together, which smoothing cannot change and "ignore
  outliers" cannot crop (a single point per run it would);
- an HParams session: the trial ``layout.trial_name``, the hyperparameters that tell the
  configurations apart (``layout.HPARAMS``), success or failure. Its metrics are the
  figures above, read by the HParams dashboard as the tags' last (only) values: the
  dashboard shows exactly the report's numbers.

Into the report run: the HParams experiment (which hyperparameters and metrics, in
order, throughput first: gpudiag.tb.hparams, the columns every gpudiag experiment
shares), the Custom Scalars layout (gpudiag.tb.views), the all-reduce table as text, and
the scaling and all-reduce plots as images (``scaling.png``, ``allreduce.png``:
throughput and efficiency against the device count; bus and algorithm bandwidth against
the message size on a log axis). Neither has a step axis, so they are pictures, not
scalars.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpudiag import layout
from gpudiag.markdown import markdown_table
from gpudiag.records.training import MIB, AllreduceResult, TrainingResult
from gpudiag.tb import hparams as tbhparams
from gpudiag.tb.views import scaling_charts
from gpudiag.tb.writer import EventWriter
from gpudiag.verdicts.scaling import SHARED_DEVICE_KINDS

ALLREDUCE_HEADERS = ["size (MiB)", "time (ms)", "algbw (GB/s)", "busbw (GB/s)", "iterations"]


def allreduce_table(result: AllreduceResult) -> str:
    """The all-reduce rows as a markdown table."""
    return markdown_table(ALLREDUCE_HEADERS, [
        [f"{r.size_bytes / MIB:g}", f"{r.time_s * 1e3:.3f}", f"{r.algbw_bytes_per_s / 1e9:.2f}",
         f"{r.busbw_bytes_per_s / 1e9:.2f}", r.iters]
        for r in result.rows])


def allreduce_png(result: AllreduceResult, kind: str, path: Path) -> tuple[int, int]:
    """Bus and algorithm bandwidth against the message size (log 2 axis); (width, height)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r.size_bytes / MIB for r in result.rows]
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
    ax.plot(sizes, [r.busbw_bytes_per_s / 1e9 for r in result.rows], marker="o",
            label="bus bandwidth")
    ax.plot(sizes, [r.algbw_bytes_per_s / 1e9 for r in result.rows], marker="o",
            linestyle="--", label="algorithm bandwidth")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [f"{s:g}" for s in sizes])
    ax.set_xlabel("message size (MiB)")
    ax.set_ylabel("GB/s")
    title = f"all-reduce over {len(result.setup.compute_devices)} devices"
    if kind in SHARED_DEVICE_KINDS:
        title += f" ({kind}: host memory)"
    ax.set_title(title)
    ax.legend()
    return _save_png(fig, path)


def write_allreduce_tb(run_dir: Path, result: AllreduceResult) -> str | None:
    """``allreduce.png`` and its image in the report run; returns the table (None with one
    device: no rows), which the caller gives the report run as text."""
    if not result.rows:
        return None
    png = run_dir / layout.ALLREDUCE_PNG
    width, height = allreduce_png(result, result.setup.kind, png)
    with EventWriter(run_dir / layout.REPORT_TB_RUN) as w:
        w.png(layout.TAG_ALLREDUCE_PLOT, png.read_bytes(), width, height)
    return allreduce_table(result)


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
    return _save_png(fig, path)


def config_figures(row: dict[str, Any] | None, config: dict[str, Any]) -> dict[str, float]:
    """One configuration's figures, by tag, exactly as the report holds them: ``row``
    from ``data.scaling.rows``, ``config`` from ``data.scaling.configs``. Missing
    figures (no trace, no NVML, no 1-device base) are left out."""
    row = row or {}
    figures: dict[str, Any] = {
        layout.TAG_BY_CONFIG_EXAMPLES_PER_S: row.get("examples_per_s"),
        layout.TAG_BY_CONFIG_SPEEDUP: row.get("speedup"),
        layout.TAG_BY_CONFIG_EFFICIENCY: row.get("efficiency"),
        layout.TAG_BY_CONFIG_FINAL_LOSS: config.get("final_loss"),
        layout.TAG_BY_CONFIG_FINAL_ACCURACY: config.get("final_accuracy"),
    }
    busy = row.get("trace_busy_fraction") or {}
    for i, device in enumerate(config.get("devices") or []):
        figures[layout.busy_share_tag(i)] = busy.get(device)
    for s in (config.get("nvml") or {}).get("summaries") or []:
        figures[layout.nvml_util_mean_tag(s["index"])] = s.get("util_mean_percent")
    return {tag: float(v) for tag, v in figures.items() if v is not None}


def device_metrics(max_devices: int, nvml_indices: Sequence[int]) -> list[tuple[str, str]]:
    """The HParams metrics of each device, (tag, display name), after the shared ones
    (gpudiag.tb.hparams.METRICS)."""
    out = [(layout.busy_share_tag(i), f"dev{i} busy share (trace)") for i in range(max_devices)]
    out += [(layout.nvml_util_mean_tag(i), f"GPU {i} util % (NVML mean)") for i in nvml_indices]
    return out


def hparams_of(strategy: str, n_devices: int, result: TrainingResult | None,
               workload: Any) -> dict[str, bool | int | float | str]:
    """A configuration's hyperparameters (``layout.HPARAMS``); from the options when the
    child failed and gave no result."""
    if result is None:
        return {layout.HPARAM_DEVICES: n_devices, layout.HPARAM_STRATEGY: strategy,
                layout.HPARAM_BATCH_PER_DEVICE: workload.batch_per_device,
                layout.HPARAM_GLOBAL_BATCH: workload.batch_per_device * n_devices,
                layout.HPARAM_VARIABLES_ON: workload.variables_on if strategy == "towers"
                else "mirrored",
                layout.HPARAM_MODEL: workload.model, layout.HPARAM_DATA: workload.data
                or "synthetic"}
    return {layout.HPARAM_DEVICES: n_devices, layout.HPARAM_STRATEGY: strategy,
            layout.HPARAM_BATCH_PER_DEVICE: result.batch_per_device,
            layout.HPARAM_GLOBAL_BATCH: result.train.global_batch,
            layout.HPARAM_VARIABLES_ON: result.variables_on,
            layout.HPARAM_MODEL: result.model, layout.HPARAM_DATA: result.data.source}


def write_scaling_tb(run_dir: Path, rows: Sequence[dict[str, Any]], configs: dict[str, Any],
                     runs: Sequence[Any], kind: str, workload: Any) -> None:
    """Every configuration's figures and HParams session, the experiment, the layout and
    ``scaling.png`` (``rows``: verdicts.scaling_rows; ``configs``: the report's
    per-configuration data; ``runs``: judge.ConfigRun, failed ones included)."""
    by_name = {r["name"]: r for r in rows}
    nvml_indices = sorted({s["index"] for c in configs.values()
                           for s in (c.get("nvml") or {}).get("summaries") or []})
    trials = [hparams_of(run.strategy, run.n_devices, run.result, workload) for run in runs]
    for run, trial in zip(runs, trials, strict=True):
        config = configs.get(run.name)
        with EventWriter(run_dir / run.name) as w:
            w.hparams_session(layout.trial_name(run_dir.name, run.name), trial,
                              ok=config is not None)
            if config is not None:
                last = max(1, int(config.get("steps") or 1))
                for tag, value in config_figures(by_name.get(run.name), config).items():
                    for step in sorted({1, last}):
                        w.scalar(tag, value, step)
    max_devices = max((r.n_devices for r in runs), default=0)
    png = run_dir / layout.PLOT_PNG
    with EventWriter(run_dir / layout.REPORT_TB_RUN) as w:
        tbhparams.write_experiment(w, trials, device_metrics(max_devices, nvml_indices))
        w.custom_scalars(scaling_charts(nvml=bool(nvml_indices)))
        if rows:
            width, height = plot_png(rows, kind, png)
            w.png(layout.TAG_SCALING_PLOT, png.read_bytes(), width, height)


def _save_png(fig: Any, path: Path) -> tuple[int, int]:
    """Lay out, save as PNG, close; the image's (width, height) for TensorBoard."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, format="png")
    width, height = (int(v) for v in fig.canvas.get_width_height())
    plt.close(fig)
    return width, height
