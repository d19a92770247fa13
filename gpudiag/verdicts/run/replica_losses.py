"""Whether a distributed fit's batch losses are per replica or summed over its replicas
(pure): run.learning judges a loss against ln(classes) only per replica.

tf_keras reduces what one step returns with ``reduce_per_replica(..., reduction=
model.distribute_reduction_method)``; its "auto" is "sum" off TPUs, and under a
MultiWorkerMirroredStrategy in multi-worker mode that is ``strategy.reduce("SUM", ...)``
of every replica's logs, each already the global mean: the batch logs its callbacks get
are ``num_replicas_in_sync`` times the loss (2 x ln 10 at the start of a 2-replica,
10-class fit). Its epoch logs are the metrics read once more across the replicas: the
loss itself. Keras 3's "auto" is "mean" (no sum); a MirroredStrategy's metric results are
one mirrored value (nothing to sum).

Two sources, the observed first: the last batch's running mean beside its epoch's loss
(the two are the same value read twice: a ratio of N says the batch logs were summed, 1
that they were not), else what the hooks recorded of the fit (the Keras package, the
strategy, multi-worker mode, the reduction method). Neither: cannot tell.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudiag.records.run import StepSeries

RATIO_TOLERANCE = 0.03  # a ratio within 3 % of N (or of 1) is N (or 1)
SUMMING = ("MultiWorkerMirrored", "CollectiveAllReduce")


@dataclass(frozen=True)
class LossScale:
    """What a fit's batch losses are divided by to be per replica: ``factor`` 1 (they
    are), N (summed over N replicas), None (cannot tell); ``words`` say why (empty for a
    fit of one replica)."""

    factor: int | None
    words: str = ""


def _replicas(s: StepSeries) -> int | None:
    n = s.facts.get("replicas")
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def _observed(s: StepSeries, replicas: int) -> LossScale | None:
    """From the last epoch's loss against its last batch's running mean (None: no such
    pair, or a ratio that is neither 1 nor N)."""
    if not s.epochs or not s.steps:
        return None
    epoch = s.epochs[-1].get("loss")
    last = s.steps[-1].loss
    if not isinstance(epoch, int | float) or last is None or epoch <= 0 or last <= 0:
        return None
    ratio = last / epoch
    if abs(ratio - replicas) <= RATIO_TOLERANCE * replicas:
        return LossScale(replicas, (
            f"its batch losses are summed over its {replicas} replicas, the last batch's "
            f"running mean {last:.4g} being {ratio:.2f} x its epoch's loss {epoch:.4g}: "
            f"judged per replica, each divided by {replicas}"))
    if abs(ratio - 1) <= RATIO_TOLERANCE:
        return LossScale(1)
    return None


def loss_scale(s: StepSeries) -> LossScale:
    """What ``s``'s batch losses are divided by to be per replica."""
    replicas = _replicas(s)
    if s.kind != "fit" or replicas is None or replicas <= 1:
        return LossScale(1)
    observed = _observed(s, replicas)
    if observed is not None:
        return observed
    keras, strategy = s.facts.get("keras"), str(s.facts.get("strategy") or "")
    if keras == "keras":  # Keras 3 averages what its replicas return
        return LossScale(1)
    if keras == "tf_keras" and any(k in strategy for k in SUMMING):
        multi, how = s.facts.get("multi_worker"), s.facts.get("reduction")
        if multi is True and how in ("auto", "sum"):
            return LossScale(replicas, (
                f"its batch losses are summed over its {replicas} replicas, tf_keras "
                f"reducing a multi-worker {strategy} fit's batch logs with "
                f"distribute_reduction_method={how!r}, a sum: judged per replica, each "
                f"divided by {replicas}"))
        if multi is False or how in ("first", "mean"):
            return LossScale(1)
    elif keras == "tf_keras" and strategy:
        return LossScale(1)  # one worker: the metrics' results are one mirrored value
    return LossScale(None, (
        f"no ln(classes) check: cannot tell whether the batch losses of this "
        f"{replicas}-replica fit are per replica or summed over its replicas (no epoch's "
        f"loss beside its last batch, and the Keras package or the strategy's reduction "
        f"was not recorded)"))
