"""`gpudiag tensorboard --check`: does a running TensorBoard show what gpudiag wrote?

What is expected comes from the run directories themselves (each one read by
gpudiag.rundir.load_run: its report, and gpudiag.layout's names), not from TensorBoard:
every run directory's ``report`` run has the short verdict, the findings and the report
as text, and the Text tab's first card (the first text tag in order) is the short verdict
(``layout.TAG_VERDICT``); a `run` run has an HParams trial per TensorFlow process that
trained; a scaling
run has, per configuration, the training scalars and the figures by device count,
histograms, an HParams trial, a profile (where the report has a trace), the plot as an
image and the scaling charts in Custom Scalars; a memory run its ``memory-<mode>``
scalars and chart; a monitor run with NVML data its ``nvml`` scalars and chart. Each
dashboard is then asked over HTTP, the way the browser asks it, and must list at least
that. Pure comparison (``compare``) apart from the HTTP reads (``observe``). No
TensorFlow.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudiag import layout
from gpudiag.rundir import Run, list_runs
from gpudiag.tb import views as tbviews

PLUGINS = ("scalars", "histograms", "text", "images", "hparams", "custom_scalars", "profile")
# Tags every run of a plugin must have: {plugin: {run: {tags}}}; an empty set: the run
# must be there with any tag.
Tags = dict[str, set[str]]


@dataclass
class Expected:
    """What each dashboard must list: runs and their tags, trials, chart categories."""

    runs: dict[str, Tags] = field(default_factory=lambda: {p: {} for p in PLUGINS})
    categories: set[str] = field(default_factory=set)
    first_metric: str | None = None  # HParams' first metric (a scaling run's experiment)

    def need(self, plugin: str, run: str, *tags: str) -> None:
        self.runs[plugin].setdefault(run, set()).update(tags)


def _run(prefix: str, *parts: str) -> str:
    return "/".join(p for p in (prefix, *parts) if p and p != ".")


def _runs(logdir: Path) -> list[Run]:
    """The run directories under ``logdir`` that wrote a report run (gpudiag.rundir)."""
    return sorted((r for r in list_runs(logdir) if (r.path / layout.REPORT_TB_RUN).is_dir()),
                  key=lambda r: r.path)


def expected(logdir: Path) -> Expected:
    """Everything the run directories under ``logdir`` promise (see the module docstring)."""
    out = Expected()
    for run in _runs(logdir):
        run_dir = run.path
        prefix = run_dir.relative_to(logdir).as_posix()
        report_run = _run(prefix, layout.REPORT_TB_RUN)
        out.need("text", report_run, layout.TAG_VERDICT, layout.TAG_FINDINGS, layout.TAG_REPORT)
        data = run.report.data
        command = run.command
        if command == "run":
            for process in (data.get("run") or {}).get("tensorflow_processes") or []:
                if (process.get("record") or {}).get("series") and \
                        not process.get("server_only"):
                    out.need("hparams", layout.trial_name(
                        run_dir.name, layout.run_tb_name(int(process["pid"]))))
        elif command == "scaling":
            _scaling(out, prefix, run_dir.name, data)
        elif command == "memory":
            for mem in sorted(run_dir.glob(f"{layout.MEMORY_TB_RUN_PREFIX}*")):
                if mem.is_dir() and next(mem.glob("events.out.tfevents.*"), None):
                    out.need("scalars", _run(prefix, mem.name), layout.TAG_MEMORY_TF_CURRENT)
                    out.categories.add(tbviews.MEMORY)
            if data.get("memory"):
                out.need("text", report_run, layout.TAG_MEMORY)
        elif command == "monitor":
            tags = (data.get("nvml_tensorboard") or {}).get("tags") or []
            if tags:
                out.need("scalars", _run(prefix, layout.NVML_TB_RUN), *tags)
                out.categories.add(tbviews.GPUS)
    return out


def _scaling(out: Expected, prefix: str, run_dir_name: str, data: dict[str, Any]) -> None:
    scaling = data.get("scaling") or {}
    configs: dict[str, Any] = scaling.get("configs") or {}
    workload = (data.get("scaling_options") or {}).get("workload") or {}
    report_run = _run(prefix, layout.REPORT_TB_RUN)
    if configs:
        out.first_metric = layout.TAG_BY_CONFIG_EXAMPLES_PER_S
        out.need("text", report_run, layout.TAG_SCALING_TABLE)
        out.need("images", report_run, layout.TAG_SCALING_PLOT)
        out.categories.add(tbviews.SCALING)
    if (data.get("allreduce") or {}).get("rows"):
        out.need("text", report_run, layout.TAG_ALLREDUCE_TABLE)
        out.need("images", report_run, layout.TAG_ALLREDUCE_PLOT)
    for name, config in configs.items():
        run = _run(prefix, name)
        out.need("scalars", run, layout.TAG_TRAIN_LOSS, layout.TAG_TRAIN_EXAMPLES_PER_S,
                 layout.TAG_BY_CONFIG_EXAMPLES_PER_S)
        out.need("hparams", layout.trial_name(run_dir_name, name))
        if workload.get("histogram_every") and config.get("strategy") != "keras":
            out.need("histograms", run)
        if "reason" not in (config.get("trace") or {"reason": None}):
            out.need("profile", run)
        if config.get("nvml"):
            out.categories.add(tbviews.GPUS)


@dataclass(frozen=True)
class Observed:
    """What the server's dashboards list: {plugin: {run: {tags}}} (hparams: trial names
    as runs), the plugins TensorBoard reports active, the Custom Scalars categories, and
    the HParams metrics in the order the dashboard shows them."""

    runs: dict[str, Tags]
    active: set[str]
    categories: set[str]
    hparams_metrics: list[str]


def _tags(answer: dict[str, Any]) -> Tags:
    return {run: set(tags) for run, tags in answer.items()}


def observe(get: Callable[..., Any]) -> Observed:
    """Ask every dashboard what it lists. ``get(path, body=None)``: the JSON answer of the
    server to a GET (or a POST with ``body``) of ``path``."""
    runs: dict[str, Tags] = {}
    for plugin in ("scalars", "histograms", "text", "images"):
        runs[plugin] = _tags(get(f"/data/plugin/{plugin}/tags"))
    experiment = get("/data/plugin/hparams/experiment", {"experimentName": ""})
    groups = get("/data/plugin/hparams/session_groups", {
        "experimentName": "", "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS",
                                                  "STATUS_FAILURE", "STATUS_RUNNING"],
        "colParams": [], "startIndex": 0, "sliceSize": 1000})
    runs["hparams"] = {g["name"]: set() for g in groups.get("sessionGroups", [])}
    layout_answer = get("/data/plugin/custom_scalars/layout")
    categories = {c["title"] for c in layout_answer.get("category", [])}
    runs["custom_scalars"] = {}
    profile_runs = get("/data/plugin/profile/runs")
    runs["profile"] = {r.rsplit("/", 1)[0]: set() for r in profile_runs}
    listing = get("/data/plugins_listing")
    active = {name for name, info in listing.items() if info.get("enabled")}
    metrics = [m["name"]["tag"] for m in experiment.get("metricInfos", [])]
    return Observed(runs, active, categories, metrics)


@dataclass(frozen=True)
class Verdict:
    """One dashboard's outcome: ``ok``, and a line saying what it lists or lacks."""

    plugin: str
    ok: bool
    line: str


def compare(want: Expected, seen: Observed) -> list[Verdict]:
    """Per dashboard: does it list every expected run and tag (pure)."""
    verdicts = []
    for plugin in PLUGINS:
        need = want.runs[plugin]
        if plugin == "custom_scalars":
            missing = sorted(want.categories - seen.categories)
            what = f"{len(seen.categories)} chart categories"
            if not want.categories:
                verdicts.append(Verdict(plugin, True, f"{plugin}: nothing expected ({what})"))
                continue
        else:
            have = seen.runs.get(plugin, {})
            missing = [f"{run} {sorted(tags - have.get(run, set())) or ''}".strip()
                       for run, tags in sorted(need.items())
                       if run not in have or not tags <= have[run]]
            what = f"{len(need)} expected {'trials' if plugin == 'hparams' else 'runs'}"
            if not need:
                verdicts.append(Verdict(plugin, True, f"{plugin}: nothing expected "
                                        f"({len(have)} listed)"))
                continue
        inactive = plugin not in seen.active
        if plugin == "text":
            first = min((t for tags in have.values() for t in tags), default=None)
            if first != layout.TAG_VERDICT:
                missing.append(f"first card {first}, not {layout.TAG_VERDICT}")
        if plugin == "hparams" and want.first_metric is not None and \
                seen.hparams_metrics[:1] != [want.first_metric]:
            missing.append(f"first metric {seen.hparams_metrics[:1]}, not "
                           f"{want.first_metric}")
        if missing or inactive:
            gaps = ("inactive; " if inactive else "") + "; ".join(missing[:4])
            more = f" (+{len(missing) - 4} more)" if len(missing) > 4 else ""
            verdicts.append(Verdict(plugin, False, f"{plugin}: {what}, missing: {gaps}{more}"))
        else:
            verdicts.append(Verdict(plugin, True, f"{plugin}: {what}, all listed"))
    return verdicts


def check(get: Callable[..., Any], want: Expected, *, timeout_s: float = 120.0,
          settle_polls: int = 3, interval_s: float = 2.0,
          errors: tuple[type[BaseException], ...] = (OSError, ValueError),
          sleep: Callable[[float], None] = time.sleep,
          clock: Callable[[], float] = time.monotonic) -> list[Verdict]:
    """``compare`` until every dashboard passes; TensorBoard loads event files in the
    background after it starts, so a failing answer is final only once every expected
    report run is listed and the answers stayed the same ``settle_polls`` polls in a row
    (or ``timeout_s`` ran out). A read that raises one of ``errors`` is retried; at the
    end it is the one failing verdict."""
    deadline = clock() + timeout_s
    last: Observed | None = None
    same = 0
    while True:
        seen: Observed | None = None
        try:
            seen = observe(get)
        except errors as exc:
            verdicts = [Verdict("server", False, f"server: a dashboard did not answer: "
                                f"{' '.join(str(exc).split())[:200]}")]
        if seen is not None:
            verdicts = compare(want, seen)
            same = same + 1 if seen == last else 1
            last = seen
        if all(v.ok for v in verdicts) or clock() >= deadline:
            return verdicts
        if seen is not None and same >= settle_polls and \
                set(want.runs["text"]) <= set(seen.runs["text"]):
            return verdicts
        sleep(interval_s)
