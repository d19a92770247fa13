"""run.learning on a distributed fit whose batch losses are summed over its replicas
(gpudiag.verdicts.run.replica_losses), with plain records: issue 46's held-out tutorial, a
tf_keras MultiWorkerMirroredStrategy fit of 2 replicas learning slowly (accuracy 0.10 ->
0.25 over 40 steps), its batch logs 2 x ln 10 at the start, its epoch's loss 2.28."""

from __future__ import annotations

import math
from dataclasses import replace

from gpudiag.records.run import ProcessObservation, Step, StepSeries
from gpudiag.verdicts.run import progress, replica_losses

LN10 = math.log(10)
MWMS = {"replicas": 2, "strategy": "MultiWorkerMirroredStrategy", "keras": "tf_keras",
        "multi_worker": True, "reduction": "auto", "learning_rate": 0.001}


def obs(*series: StepSeries) -> ProcessObservation:
    return ProcessObservation(pid=10, ppid=1, argv=["train.py"], start_env={},
                              tf_version="2.21.0", series=list(series))


def summed_fit(facts: dict[str, object], epochs: list[dict[str, float]] | None = None,
               fall: float = 0.045) -> StepSeries:
    """40 batches of 64 whose per-replica loss falls from ln 10 by ``fall``; the running
    means tf_keras hands its callbacks, summed over 2 replicas (median about 4.55)."""
    per_replica = [LN10 - fall * i / 39 + (0.01 if i % 2 else -0.01) for i in range(40)]
    steps, total = [], 0.0
    for i, loss in enumerate(per_replica):
        total += loss
        mean = total / (i + 1)
        acc = 0.10 + 0.15 * i / 39
        steps.append(Step(i, 100.0 + i, 0.5, 2 * mean, {"accuracy": 2 * acc}, epoch=0))
    return StepSeries("fit", "Model.fit", steps, 64, 10, facts,
                      [{"loss": total / 40, "accuracy": 0.25}] if epochs is None else epochs)


def test_a_tf_keras_multi_worker_fit_is_judged_per_replica_never_stuck_at_ln10() -> None:
    f = progress.learning(obs(summed_fit(MWMS)))
    (loop,) = f.evidence["loops"]
    assert loop["loss_divided_by"] == 2
    assert loop["cause"] != "not-learning" and f.status != "fail", f.message
    assert "not learning" not in f.title and "summed over its 2 replicas" in f.message
    assert abs(loop["loss_level"] - 2.28) < 0.03  # per replica, as its epoch's loss


def test_a_summed_loss_far_above_ln10_is_no_failure_when_per_replica_it_fell() -> None:
    """Before: the summed level (about 4.2) read "far above ln 10 ... not learning" (a
    FAIL) beside an accuracy not above chance; per replica it fell clearly below ln 10."""
    s = summed_fit(MWMS, fall=0.6)
    s = replace(s, epochs=[{"loss": s.steps[-1].loss / 2, "accuracy": 0.16}])
    f = progress.learning(obs(s))
    (loop,) = f.evidence["loops"]
    assert f.status != "fail" and loop["cause"] != "not-learning", f.message
    assert loop["loss_level"] < 0.98 * LN10


def test_the_sum_is_read_from_the_epochs_loss_when_the_hooks_recorded_nothing_of_it() -> None:
    s = summed_fit({"replicas": 2, "learning_rate": 0.001})
    assert replica_losses.loss_scale(s).factor == 2
    assert "being 2.00 x its epoch's loss" in replica_losses.loss_scale(s).words
    # without an epoch's loss, from the recorded facts: tf_keras, multi-worker, "auto"
    assert replica_losses.loss_scale(replace(s, epochs=[], facts=MWMS)).factor == 2
    # Keras 3 averages; a reduction of "first" takes one replica's
    for facts in ({**MWMS, "keras": "keras"}, {**MWMS, "reduction": "first"}):
        assert replica_losses.loss_scale(replace(s, epochs=[], facts=facts)).factor == 1


def test_a_fit_of_several_replicas_it_cannot_tell_about_gets_no_ln_classes_check() -> None:
    s = summed_fit({"replicas": 2, "strategy": "MultiWorkerMirroredStrategy",
                    "learning_rate": 0.001}, epochs=[])
    f = progress.learning(obs(s))
    (loop,) = f.evidence["loops"]
    assert loop["loss_divided_by"] is None and loop["cause"] != "not-learning"
    assert "ln 10" not in f.title and f.status != "fail"
    assert "cannot tell whether the batch losses of this 2-replica fit are per replica" \
        in f.message


def test_a_single_replica_fit_stuck_at_ln10_is_still_not_learning() -> None:
    steps = [Step(i, 100.0 + i, 0.5, LN10, epoch=0) for i in range(40)]
    fit = StepSeries("fit", "Model.fit", steps, 64, 10, {"learning_rate": 0.001},
                     [{"loss": LN10, "accuracy": 0.1}])
    f = progress.learning(obs(fit))
    assert f.status == "fail" and f.title.startswith("not learning: loss 2.3 = ln 10")


def test_the_title_says_far_above_ln_classes_as_its_message_does() -> None:
    """The issue's finding: its title said "= ln 10" beside "far above ln 10" and a median
    of 4.55 in its message (the title read the epoch's loss, the message the level)."""
    steps = [Step(i, 100.0 + i, 0.5, 4.55, epoch=0) for i in range(40)]
    fit = StepSeries("fit", "Model.fit", steps, 64, 10, {"learning_rate": 0.001},
                     [{"loss": 4.55, "accuracy": 0.1}])
    f = progress.learning(obs(fit))
    assert f.status == "fail" and "far above ln 10" in f.message
    assert "far above ln 10" in f.title and "= ln 10," not in f.title


def test_without_an_epoch_the_batch_accuracy_is_per_replica_too() -> None:
    """tf_keras sums a batch's accuracy over the replicas as it sums the loss (measured: a
    2-worker fit's batch logs read accuracy 0.1719 beside its epoch's 0.0859)."""
    f = progress.learning(obs(summed_fit(MWMS, epochs=[])))
    (loop,) = f.evidence["loops"]
    assert loop["loss_divided_by"] == 2 and abs(loop["accuracy"] - 0.25) < 1e-9
