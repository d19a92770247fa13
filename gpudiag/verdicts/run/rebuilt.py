"""run.model-rebuilt: a Keras model built anew for every fit, as k-fold cross-validation
or a hyperparameter search does when it calls ``build_model()`` each round. Each new
model's fit and evaluate trace Keras's train and test functions again, and the process's
memory grows with the models. From the Keras call sites (gpudiag.inprogram.kerascalls):
the calls on another model object than the site's previous call, the tf.function tracing
inside the calls, the process's memory after them.

Measured on tests/programs/kfold_build_model.py (TensorFlow 2.21, Keras 3, CPU): ten
folds, each building its model, spent most of their time tracing and grew ~14 MiB a
fold; ``keras.backend.clear_session()`` before each build left both as they were; one
model built before the loop, its first weights restored each fold, kept the memory flat
and each fold several times faster. So the fix advised is building once.

Pure: the process's call sites and memory readings in, a finding out (None where no site
ran on MIN_MODELS models or more).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from gpudiag.layout.units import share as pct
from gpudiag.records.callsites import KerasCallSite
from gpudiag.records.run import ProcessObservation
from gpudiag.report import Action, Finding
from gpudiag.verdicts.common import title

MIN_MODELS = 3  # models at one call site: a loop that builds them
TRACE_SHARE = 0.20  # of the rebuilt sites' calls' time spent tracing: named

FIX = ("build and compile the model once, before the loop, and start each round from its "
       "first weights: `initial = model.get_weights()` and, after "
       "`model.optimizer.build(model.trainable_variables)`, the optimizer's "
       "`[v.numpy() for v in model.optimizer.variables]`, saved once; each round "
       "`model.set_weights(initial)` and each optimizer variable assigned back. Its fit and "
       "evaluate then reuse the functions they traced (where the rounds train different "
       "architectures, each needs its own model)")


def rebuilt(sites: Sequence[KerasCallSite]) -> list[KerasCallSite]:
    """The sites whose calls ran on a new model most times (MIN_MODELS or more)."""
    return [s for s in sites if (s.models or 0) >= MIN_MODELS and
            2 * (s.models or 0) >= s.calls and s.method != "__call__"]


def _growth(obs: ProcessObservation, models: int) -> str:
    points = obs.rss_after_calls
    if len(points) < 2:
        return ""
    grew = points[-1][1] - points[0][1]
    if grew <= 0:
        return (f"; the process's memory after the calls stayed at "
                f"{points[-1][1] / (1 << 20):.0f} MiB")
    return (f"; the process's memory grew from {points[0][1] / (1 << 20):.0f} MiB after call "
            f"{points[0][0]} to {points[-1][1] / (1 << 20):.0f} MiB after call {points[-1][0]}"
            f" ({grew / max(models - 1, 1) / (1 << 20):.1f} MiB a model)")


def _site_text(s: KerasCallSite) -> str:
    code = f" (`{s.code}`)" if s.code else ""
    traced = (f": tracing took {s.trace_s:.1f} s of the calls' {s.total_s:.1f} s "
              f"({pct(s.trace_s / s.total_s)})" if s.trace_s is not None and s.total_s > 0
              else f": {s.total_s:.1f} s in all")
    return (f"{s.model}.{s.method} at {s.where}{code} ran on {s.models} different models "
            f"in {s.calls} calls{traced}")


def model_rebuilt(obs: ProcessObservation, proc: str = "") -> Finding | None:
    """run.model-rebuilt: the calls on a new model each time, their tracing against their
    time, the memory after them; warn when their tracing takes TRACE_SHARE of their time."""
    found = rebuilt(obs.keras_calls)
    if not found:
        return None
    calls_s = sum(s.total_s for s in found)
    trace_s = sum(s.trace_s or 0.0 for s in found)
    share = trace_s / calls_s if calls_s > 0 else None
    models = max(s.models or 0 for s in found)
    top = max(found, key=lambda s: s.total_s)
    evidence = {"sites": [asdict(s) for s in found], "calls_s": calls_s, "trace_s": trace_s,
                "trace_share": share, "models": models, "threshold": TRACE_SHARE,
                "rss_after_calls": [list(p) for p in obs.rss_after_calls]}
    text = ("; ".join(_site_text(s) for s in found) + _growth(obs, models) +
            ": every new model's fit and evaluate trace Keras's functions again, and the "
            "models before it stay in memory while anything refers to them")
    fid = f"run.model-rebuilt{proc}"
    if share is None or share < TRACE_SHARE:
        return Finding(fid, "ok", text + f" (tracing under {pct(TRACE_SHARE)} of the calls' "
                       "time: not what it went to)", evidence,
                       title=f"{models} models built in a loop; tracing "
                             f"{pct(share or 0.0)} of their calls")
    return Finding(fid, "warn", text, evidence, advice=f"at {top.where}: {FIX}.",
                   actions=(Action("build and compile the model once before the loop; "
                                   "restore its first weights each round", top.where),),
                   title=title(f"a new model for every {top.method}: {models} models, "
                               f"tracing {pct(share)} of their calls' time",
                               f"{models} models built in a loop, tracing "
                               f"{pct(share)} of the time"))
