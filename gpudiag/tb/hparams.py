"""The HParams dashboard's experiment, with the columns of every gpudiag trial.

TensorBoard's HParams plugin reads one experiment per logdir: the first run it finds
holding one (tensorboard/plugins/hparams/backend_context.py, ``_find_experiment_tag``);
without one it builds one from the trials' sessions and scalar tags. A logdir holds
`gpudiag scaling`'s configurations (gpudiag.scaling.tb_runs, which writes an experiment)
and `gpudiag run`'s programs (gpudiag.run.tbwrite, which writes none, so that scaling's
is the one read) side by side, so scaling's experiment lists every hyperparameter either
writes (``layout.ALL_HPARAMS``) and the metrics of both, examples/s first (``METRICS``),
then its per-device metrics. A column a trial lacks is empty in its row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpudiag import layout
from gpudiag.tb.writer import EventWriter, HParam

Trial = Mapping[str, bool | int | float | str]

#: (tag, display name), in the order the dashboard shows them.
METRICS: tuple[tuple[str, str], ...] = (
    (layout.TAG_BY_CONFIG_EXAMPLES_PER_S, "examples/s (median)"),
    (layout.TAG_BY_CONFIG_STEP_TIME, "step time s (median)"),
    (layout.TAG_BY_CONFIG_SPEEDUP, "speedup"),
    (layout.TAG_BY_CONFIG_EFFICIENCY, "efficiency"),
    (layout.TAG_BY_CONFIG_FINAL_LOSS, "final loss"),
    (layout.TAG_BY_CONFIG_FINAL_ACCURACY, "final accuracy"),
)


def columns(trials: Sequence[Trial]) -> list[HParam]:
    """``layout.ALL_HPARAMS`` as dashboard columns: numeric where a trial's value is a
    number, marked as differing where the trials' values differ."""
    return [HParam(name, numeric=any(isinstance(t.get(name), int | float)
                                     and not isinstance(t.get(name), bool) for t in trials),
                   differs=len({t.get(name) for t in trials}) > 1)
            for name in layout.ALL_HPARAMS]


def write_experiment(writer: EventWriter, trials: Sequence[Trial],
                     extra_metrics: Sequence[tuple[str, str]] = ()) -> None:
    """The experiment into ``writer``'s run (the report run): every column, ``METRICS``
    then ``extra_metrics``."""
    writer.hparams_experiment(columns(trials), [*METRICS, *extra_metrics])
