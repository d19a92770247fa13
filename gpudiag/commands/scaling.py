"""`gpudiag scaling`: train the probe on 1, 2, 4 ... devices; did more devices help?

Order of work, each probe in its own child process (gpudiag.runner):

1. the collective bandwidth probe (probes/allreduce.py) on the largest device count. It
   is also the device check: asking for more GPUs than exist fails here, before any
   training, with exit 2 (or, with ``--virtual-gpus N``, GPU 0 is split into N);
2. per device count (1, 2, 4 ... powers of two up to ``--max-gpus``, plus the maximum)
   and per strategy (``--strategy``, default towers,mirrored): the training probe
   (probes/training.py) in a child with that many devices, while this process samples
   NVML (when there is NVML); its TensorBoard run is ``<run dir>/<strategy>-<n>dev/``;
3. verdicts (gpudiag.verdicts): every device did work (placement, profiler trace, NVML),
   scaling efficiency against the communication lower bound, learning, towers beside
   mirrored, the all-reduce table.

Writes, besides report.json/report.md: ``scaling/`` (a TensorBoard run with the table
as text, the scaling plot as an image and throughput/efficiency scalars against the
device count), ``allreduce/`` (bus and algorithm bandwidth against the message size in
MiB), ``nvml/`` (per-GPU scalars, when NVML is there), and ``scaling.png``.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpudiag import nvml, traces, verdicts
from gpudiag.errors import UsageError
from gpudiag.report import Finding
from gpudiag.runner import STDOUT_TXT, ChildResult, run_child
from gpudiag.session import RunSession
from gpudiag.tb import EventWriter, markdown_table
from gpudiag.train.datafile import check_data_file
from gpudiag.train.specs import MODEL_SPECS, model_spec

STRATEGIES = ("towers", "mirrored", "keras")
DEFAULT_STRATEGIES = ("towers", "mirrored")
MAX_VIRTUAL_CPU_DEVICES = 16
SCALING_TB_RUN = "scaling"
ALLREDUCE_TB_RUN = "allreduce"
PLOT_PNG = "scaling.png"
TAG_TABLE = "gpudiag/scaling"
TAG_PLOT = "gpudiag/scaling_plot"
TAG_ALLREDUCE_TABLE = "gpudiag/allreduce"
STEP_LINE = re.compile(r"^GPUDIAG-STEP (\d+) (\d+) (\S+)$")
NVML_IDLE_THRESHOLD_PERCENT = nvml.DEFAULT_ACTIVE_THRESHOLD_PERCENT
MIB = 1 << 20
KERAS_PLACEMENT_REASON = "model.fit builds its own step function, which gpudiag does not trace"

#: How the command opens NVML: the real backend. Tests put a scripted fake here.
open_nvml: Callable[[], nvml.NvmlBackend | nvml.NvmlUnavailable] = nvml.open_backend


@dataclass(frozen=True)
class ScalingOptions:
    """Everything `gpudiag scaling` was asked to do (validated by ``check``)."""

    max_gpus: int | None = None
    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    model: str = "cnn-small"
    batch_per_device: int = 32
    steps: int = 100
    warmup_steps: int = 10
    profile_steps: int = 5
    learning_rate: float = 0.05
    momentum: float = 0.9
    ema_decay: float = 0.99  # 0: no moving average
    histogram_every: int = 100  # 0: no histograms
    variables_on: str = "cpu"
    data: Path | None = None
    virtual_gpus: int | None = None
    memory_limit_mb: int = 1024
    allreduce_min_mb: float = 1.0
    allreduce_max_mb: float = 256.0
    timeout_s: float = 300.0
    seed: int = 0

    def training_config(self, strategy: str, n: int, logdir: Path) -> dict[str, Any]:
        return {
            "n_devices": n, "strategy": strategy, "model": self.model,
            "batch_per_device": self.batch_per_device, "steps": self.steps,
            "warmup_steps": self.warmup_steps, "profile_steps": self.profile_steps,
            "learning_rate": self.learning_rate, "momentum": self.momentum,
            "ema_decay": self.ema_decay or None, "histogram_every": self.histogram_every,
            "scalars": True, "variables_on": self.variables_on,
            "data": str(self.data) if self.data else None, "logdir": str(logdir),
            "seed": self.seed, "checkpoint": True, "virtual_gpus": self.virtual_gpus,
            "memory_limit_mb": self.memory_limit_mb, "progress": True,
        }


def parse_strategies(text: str) -> tuple[str, ...]:
    """``towers,mirrored`` -> ("towers", "mirrored"); UsageError for unknown names."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise UsageError("--strategy needs at least one of: " + ", ".join(STRATEGIES))
    bad = [n for n in names if n not in STRATEGIES]
    if bad:
        raise UsageError(f"--strategy {bad[0]!r} is not one of: {', '.join(STRATEGIES)}")
    return tuple(dict.fromkeys(names))


def device_counts(max_devices: int) -> list[int]:
    """1, 2, 4 ... (powers of two below the maximum), then the maximum itself."""
    counts, n = [], 1
    while n < max_devices:
        counts.append(n)
        n *= 2
    return [*counts, max_devices]


def allreduce_sizes(min_mb: float, max_mb: float) -> list[int]:
    """Message sizes in bytes from min to max MiB, doubling (nccl-tests' -f 2)."""
    sizes, size = [], int(min_mb * MIB)
    while size <= int(max_mb * MIB):
        sizes.append(size)
        size *= 2
    return sizes


def check(options: ScalingOptions) -> None:
    """Reject bad combinations with a one-line UsageError (exit 2) before any child runs."""
    if options.max_gpus is not None and options.max_gpus < 1:
        raise UsageError(f"--max-gpus must be at least 1, got {options.max_gpus}")
    if options.model not in MODEL_SPECS:
        model_spec(options.model)  # raises the UsageError naming the choices
    if options.steps <= options.warmup_steps + options.profile_steps:
        raise UsageError(
            f"--steps {options.steps} leaves no timed steps after {options.warmup_steps} "
            f"warm-up and {options.profile_steps} profiled steps; use more --steps"
        )
    if options.variables_on not in ("cpu", "device"):
        raise UsageError(f"--variables-on {options.variables_on!r} is not one of: cpu, device")
    if not 0 <= options.ema_decay < 1:
        raise UsageError(f"--ema-decay must be in [0, 1), got {options.ema_decay:g}")
    if not 0 < options.allreduce_min_mb <= options.allreduce_max_mb:
        raise UsageError("--allreduce-min-mb must be > 0 and at most --allreduce-max-mb")
    if options.data is not None:
        check_data_file(options.data)


# ------------------------------------------------------------------------- children


def _usage_error_from(child: ChildResult) -> UsageError | None:
    """A child that failed on the user's input (devices asked for, data) -> exit 2."""
    if child.error_type in ("DeviceRequestError", "UsageError"):
        return UsageError(child.error or "bad input")
    return None


class _ProgressTail:
    """Follows a child's stdout for ``GPUDIAG-STEP i n loss`` lines in a thread."""

    def __init__(self, path: Path, update: Callable[[int, int, float], None]) -> None:
        self.path = path
        self.update = update
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="gpudiag-progress")

    def __enter__(self) -> _ProgressTail:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self._poll()

    def _poll(self) -> None:
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return
        for line in reversed(text.splitlines()):
            m = STEP_LINE.match(line.strip())
            if m:
                loss = float(m.group(3)) if m.group(3) != "nan" else math.nan
                self.update(int(m.group(1)), int(m.group(2)), loss)
                return

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            self._poll()


@dataclass(frozen=True)
class ConfigRun:
    """One training configuration's outcome as the parent saw it."""

    name: str
    strategy: str
    n_devices: int
    child: ChildResult
    sampling: nvml.SamplingResult | None


def expected_nvml_indices(
    setup: dict[str, Any], physical: Sequence[nvml.DeviceInfo]
) -> list[int] | None:
    """NVML indices of the GPUs a configuration's child used (None: cannot tell)."""
    kind = setup.get("kind")
    if kind not in ("gpu", "virtual-gpu"):
        return None
    if kind == "virtual-gpu":
        details = [{"name": "/device:GPU:0", "physical_index": 0}]
    else:
        details = [{"name": d, "physical_index": i}
                   for i, d in enumerate(setup.get("compute_devices", []))]
    mapped = nvml.map_logical_to_physical(details, setup.get("cuda_visible_devices"),
                                          list(physical))
    indices = [m.nvml_index for m in mapped]
    if any(i is None for i in indices):
        return None
    return sorted({int(i) for i in indices if i is not None})


def nvml_finding(run: ConfigRun, backend_reason: str | None,
                 physical: Sequence[nvml.DeviceInfo]) -> Finding | None:
    """The NVML cross-check of one configuration; None when NVML was absent (one skip
    finding for the whole run says so)."""
    if backend_reason is not None or run.sampling is None:
        return None
    setup = (run.child.result or {}).get("setup", {})
    expected = expected_nvml_indices(setup, physical)
    return verdicts.every_gpu_used(
        run.sampling.summaries, NVML_IDLE_THRESHOLD_PERCENT, expected_indices=expected,
        check_id=f"scaling.nvml.{run.name}",
    )


# ------------------------------------------------------------------------- the command


def run(session: RunSession, options: ScalingOptions, *, console: Any = None) -> None:
    """Run the whole scaling diagnosis into ``session``. See the module docstring."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    check(options)
    backend = open_nvml()
    backend_reason = backend.reason if isinstance(backend, nvml.NvmlUnavailable) else None
    physical: list[nvml.DeviceInfo] = []
    if not isinstance(backend, nvml.NvmlUnavailable):
        for i in range(backend.device_count()):
            try:
                physical.append(backend.device_info(i))
            except nvml.DeviceError:
                continue
    session.set("scaling_options", {k: (str(v) if isinstance(v, Path) else v)
                                    for k, v in asdict(options).items()})
    progress = Progress(TextColumn("{task.description}"), BarColumn(),
                        TextColumn("{task.fields[status]}"), TimeElapsedColumn(),
                        console=console, transient=False)
    runs: list[ConfigRun] = []
    interrupted: KeyboardInterrupt | None = None
    try:
        with progress:
            allreduce, setup = _run_allreduce(session, options, progress)
            if setup is None:
                return
            max_n = len(setup["compute_devices"])
            counts = device_counts(max_n)
            tasks = {
                (s, n): progress.add_task(f"{s} {n} dev", total=options.steps, status="waiting",
                                          start=False)
                for n in counts for s in options.strategies
            }
            try:
                for n in counts:
                    for strategy in options.strategies:
                        cfg_run = _run_config(session, options, strategy, n, backend, progress,
                                              tasks[(strategy, n)])
                        runs.append(cfg_run)
                        if not cfg_run.child.ok:
                            err = _usage_error_from(cfg_run.child)
                            if err is not None:
                                raise err
            except KeyboardInterrupt as exc:  # judge what finished, then stop
                interrupted = exc
    finally:
        if not isinstance(backend, nvml.NvmlUnavailable):
            backend.close()
    rows, configs = _judge(session, options, setup, allreduce, runs, backend_reason, physical)
    if console is not None and rows:
        render_table(rows, configs, console)
    if interrupted is not None:
        raise interrupted


def _run_allreduce(session: RunSession, options: ScalingOptions,
                   progress: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The collective probe, which is also the device check; (result, device setup)."""
    task = progress.add_task("all-reduce", total=1, status="measuring")
    config = {"n_devices": options.max_gpus, "virtual_gpus": options.virtual_gpus,
              "memory_limit_mb": options.memory_limit_mb,
              "sizes_bytes": allreduce_sizes(options.allreduce_min_mb, options.allreduce_max_mb),
              "max_virtual_cpu_devices": MAX_VIRTUAL_CPU_DEVICES}
    child = run_child("allreduce", config, run_dir=session.run_dir, name="allreduce",
                      timeout_s=options.timeout_s)
    if not child.ok or child.result is None:
        err = _usage_error_from(child)
        if err is not None:
            raise err
        progress.update(task, completed=1, status="failed")
        session.add(verdicts.child_failed("scaling.allreduce",
                                          "the collective bandwidth probe (and device set-up)",
                                          child))
        return None, None
    setup = child.result["setup"]
    session.set("devices", setup)
    progress.update(task, completed=1, status=_allreduce_status(child.result))
    session.set("allreduce", child.result)
    _write_allreduce_tb(session.run_dir / ALLREDUCE_TB_RUN, child.result)
    return child.result, setup


def _allreduce_status(result: dict[str, Any]) -> str:
    rows = result.get("rows") or []
    if not rows:
        return "1 device: skipped"
    best = max(r["busbw_bytes_per_s"] for r in rows)
    return f"peak busbw {best / 1e9:.2f} GB/s"


def _run_config(session: RunSession, options: ScalingOptions, strategy: str, n: int,
                backend: nvml.NvmlBackend | nvml.NvmlUnavailable, progress: Any,
                task: Any) -> ConfigRun:
    name = f"{strategy}-{n}dev"
    logdir = session.run_dir / name
    progress.start_task(task)
    progress.update(task, status="starting")

    def update(step: int, total: int, loss: float) -> None:
        progress.update(task, completed=step, total=total, status=f"loss {loss:.3f}")

    sampler = None
    if not isinstance(backend, nvml.NvmlUnavailable):
        sampler = nvml.Sampler(backend).start()
    try:
        stdout = session.run_dir / "children" / name / STDOUT_TXT
        with _ProgressTail(stdout, update):
            child = run_child("training", options.training_config(strategy, n, logdir),
                              run_dir=session.run_dir, name=name, timeout_s=options.timeout_s)
    finally:
        sampling = sampler.stop() if sampler is not None else None
    if sampling is not None:
        nvml.write_scalars(sampling, session.run_dir / "nvml" / name)
    if child.ok and child.result:
        eps = child.result["train"].get("examples_per_s")
        progress.update(task, status=f"{eps:,.0f} ex/s" if eps else "done")
    else:
        progress.update(task, status=f"failed: {child.error_type}")
    return ConfigRun(name, strategy, n, child, sampling)


# ------------------------------------------------------------------------- verdicts


def _trace_summary(result: dict[str, Any]) -> tuple[traces.TraceSummary | None, str | None]:
    train = result["train"]
    if not train.get("profile_dir"):
        return None, "no profiler window (--profile-steps 0)"
    files = traces.find_xplanes(Path(train["profile_dir"]))
    if not files:
        return None, f"no .xplane.pb under {train['profile_dir']}"
    try:
        return traces.summarize(files[-1], train.get("op_devices") or {}, train["devices"]), None
    except traces.TraceError as exc:
        return None, str(exc)


def _point(run_: ConfigRun, summary: traces.TraceSummary | None) -> dict[str, Any]:
    train = run_.child.result["train"] if run_.child.result else {}
    return {
        "strategy": run_.strategy, "n_devices": run_.n_devices, "name": run_.name,
        "examples_per_s": train.get("examples_per_s"), "step_s": train.get("step_s_median"),
        "input_wait_fraction": summary.input_wait_fraction if summary else None,
        "trace_busy_fraction": ({d: busy / summary.window_s
                                 for d, busy in summary.busy_by_device().items()}
                                if summary and summary.window_s > 0 else None),
    }


def _judge(session: RunSession, options: ScalingOptions, setup: dict[str, Any],
           allreduce: dict[str, Any] | None, runs: list[ConfigRun],
           backend_reason: str | None, physical: Sequence[nvml.DeviceInfo],
           ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every finding of the run; returns the scaling rows and per-configuration data."""
    kind = setup["kind"]
    points: list[dict[str, Any]] = []
    learning_rows: list[dict[str, Any]] = []
    configs_data: dict[str, Any] = {}
    gradient_bytes = 0
    variables_on = options.variables_on
    for r in runs:
        if not r.child.ok or not r.child.result:
            session.add(verdicts.child_failed(f"scaling.run.{r.name}",
                                              f"training {r.name}", r.child))
            continue
        result = r.child.result
        train = result["train"]
        gradient_bytes = result["gradient_bytes"]
        summary, reason = _trace_summary(result)
        trace_busy = ({d: b for d, b in summary.busy_by_device().items()
                       if d in train["devices"]} if summary else None)
        session.add(verdicts.device_work(
            r.name, train["devices"], train.get("ops_by_device") or None, trace_busy,
            trace_window_s=summary.window_s if summary else None, trace_reason=reason,
            placement_reason=KERAS_PLACEMENT_REASON if r.strategy == "keras" else None))
        finding = nvml_finding(r, backend_reason, physical)
        if finding is not None:
            session.add(finding)
        point = _point(r, summary)
        points.append(point)
        learning_rows.append({
            "name": r.name, "num_classes": result["data"]["num_classes"],
            "steps": train["steps"], "learning_rate": options.learning_rate,
            "initial_loss": train["losses"][0] if train["losses"] else None,
            "final_loss": train["final_loss"], "final_accuracy": train["final_accuracy"],
            "eval_accuracy": train["eval_accuracy"],
            "eval_accuracy_ema": train["eval_accuracy_ema"],
        })
        configs_data[r.name] = {
            "strategy": r.strategy, "n_devices": r.n_devices, "devices": train["devices"],
            "global_batch": train["global_batch"], "examples_per_s": train["examples_per_s"],
            "step_s_median": train["step_s_median"], "timed_steps": len(train["timed_steps"]),
            "final_loss": train["final_loss"], "final_accuracy": train["final_accuracy"],
            "eval_accuracy": train["eval_accuracy"],
            "eval_accuracy_ema": train["eval_accuracy_ema"],
            "ops_by_device": train["ops_by_device"], "checkpoint": train["checkpoint_path"],
            "tensorboard_run": str(session.run_dir / r.name),
            "trace": summary.to_dict() if summary else {"reason": reason},
            "nvml": r.sampling.to_dict() if r.sampling else None,
            "child_duration_s": r.child.duration_s,
        }
    if backend_reason is not None:
        session.add(verdicts.every_gpu_used([], NVML_IDLE_THRESHOLD_PERCENT,
                                            nvml_unavailable_reason=backend_reason,
                                            check_id="scaling.nvml"))
    rows = verdicts.scaling_rows(points)
    busbw = None
    if allreduce and allreduce.get("rows"):
        busbw = max(row["busbw_bytes_per_s"] for row in allreduce["rows"])
    for strategy in options.strategies:
        session.add(verdicts.scaling_efficiency(
            strategy, rows, kind, gradient_bytes=gradient_bytes, busbw_bytes_per_s=busbw,
            batch_per_device=options.batch_per_device,
            variables_on=variables_on if strategy == "towers" else "mirrored"))
    session.add(verdicts.learning(learning_rows))
    if {"towers", "mirrored"} <= set(options.strategies):
        session.add(verdicts.towers_vs_mirrored(rows))
    if allreduce is not None:
        session.add(verdicts.allreduce_bandwidth(allreduce, kind))
    session.set("scaling", {"device_kind": kind, "gradient_bytes": gradient_bytes,
                            "peak_busbw_bytes_per_s": busbw, "rows": rows,
                            "configs": configs_data})
    table_rows = table(rows, configs_data)
    session.text(TAG_TABLE, markdown_table(TABLE_HEADERS, table_rows))
    _write_scaling_tb(session.run_dir, rows, table_rows, kind)
    return rows, configs_data


TABLE_HEADERS = ["strategy", "devices", "examples/s", "speedup", "efficiency",
                 "per-device busy (trace)", "per-device util (NVML)"]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def table(rows: Sequence[dict[str, Any]], configs: dict[str, Any]) -> list[list[str]]:
    """The scaling table's cells: one row per configuration."""
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


def _fmt(value: float | None, pattern: str) -> str:
    return "n/a" if value is None else pattern.format(value)


def render_table(rows: Sequence[dict[str, Any]], configs: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    t = Table(title="scaling (efficiency = throughput(n) / (n x throughput(1)))")
    for h in TABLE_HEADERS:
        t.add_column(h)
    for cells in table(rows, configs):
        t.add_row(*cells)
    console.print(t)


# ------------------------------------------------------------------------- TensorBoard


def _write_allreduce_tb(tb_dir: Path, result: dict[str, Any]) -> None:
    rows = result.get("rows") or []
    if not rows:
        return
    with EventWriter(tb_dir) as w:
        for r in rows:
            step = max(1, r["size_bytes"] // MIB)
            w.scalar("allreduce/busbw_GBps", r["busbw_bytes_per_s"] / 1e9, step)
            w.scalar("allreduce/algbw_GBps", r["algbw_bytes_per_s"] / 1e9, step)
            w.scalar("allreduce/time_ms", r["time_s"] * 1e3, step)
        w.text(TAG_ALLREDUCE_TABLE, markdown_table(
            ["size (MiB)", "time (ms)", "algbw (GB/s)", "busbw (GB/s)", "iterations"],
            [[f"{r['size_bytes'] / MIB:g}", f"{r['time_s'] * 1e3:.3f}",
              f"{r['algbw_bytes_per_s'] / 1e9:.2f}", f"{r['busbw_bytes_per_s'] / 1e9:.2f}",
              r["iters"]] for r in rows]))


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
    if kind in verdicts.SHARED_DEVICE_KINDS:
        title += f" ({kind}: not meaningful)"
    ax2.set_title(title)
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, format="png")
    width, height = (int(v) for v in fig.canvas.get_width_height())
    plt.close(fig)
    return width, height


def _write_scaling_tb(run_dir: Path, rows: Sequence[dict[str, Any]],
                      table_rows: list[list[str]], kind: str) -> None:
    png = run_dir / PLOT_PNG
    with EventWriter(run_dir / SCALING_TB_RUN) as w:
        for r in rows:
            if r.get("examples_per_s"):
                w.scalar(f"scaling/{r['strategy']}/examples_per_s", r["examples_per_s"],
                         r["n_devices"])
            if r.get("efficiency") is not None:
                w.scalar(f"scaling/{r['strategy']}/efficiency", r["efficiency"], r["n_devices"])
        w.text(TAG_TABLE, markdown_table(TABLE_HEADERS, table_rows))
        if rows:
            width, height = plot_png(rows, kind, png)
            w.png(TAG_PLOT, png.read_bytes(), width, height)
