"""Fit's rows as steps, read a few at a time (the live thread) or all at once (the end):
the same training steps per call either way."""

from __future__ import annotations

from gpudiag.layout.loopevents import FitRow
from gpudiag.run.runstate import fit_steps


def rows(spe: int, calls: int) -> list[FitRow]:
    """A fit with steps_per_execution=spe: on_train_batch_end gets each call's last batch."""
    return [FitRow(i=k, epoch=0, batch=(k + 1) * spe - 1, t0=float(k), t_end=k + 0.5)
            for k in range(calls)]


def test_steps_per_call_read_in_pieces_are_those_read_at_once() -> None:
    all_rows = rows(16, 6)
    whole = [s.per_call for s in fit_steps(all_rows)]
    carry: dict[int | None, int] = {}
    pieces = [s.per_call for chunk in (all_rows[:1], all_rows[1:4], all_rows[4:])
              for s in fit_steps(chunk, carry)]
    assert whole == pieces == [16] * 6


def test_one_step_per_call_stays_one_read_in_pieces() -> None:
    all_rows = rows(1, 5)
    carry: dict[int | None, int] = {}
    assert [s.per_call for chunk in (all_rows[:2], all_rows[2:])
            for s in fit_steps(chunk, carry)] == [1] * 5
    # without the carry a piece starting mid-epoch would count from batch 0: the bug the
    # live TensorBoard file had (its step times halved)
    assert [s.per_call for s in fit_steps(all_rows[2:])] == [3, 1, 1]
