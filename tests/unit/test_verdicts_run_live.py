"""What `gpudiag run` decides while the program runs, from plain numbers: a loss stuck at
ln(classes) (gpudiag.verdicts.run.live)."""

from __future__ import annotations

import math

from gpudiag.verdicts.run import live as run_live

LN10 = math.log(10)


def test_a_loss_at_ln_classes_for_the_window_is_said_with_the_class_evidence() -> None:
    recent = [LN10 + 0.001 * (i % 3) for i in range(30)]
    text = run_live.stuck_at_ln_classes("tf.function step", LN10, recent, 150, 10,
                                        "the logits [batch, 10] of 1 op")
    assert text is not None
    assert text.startswith("the loss of tf.function step has stayed at ln 10 = 2.3026 over "
                           "150 steps")
    assert "the model predicts all 10 classes alike (the logits [batch, 10] of 1 op)" in text


def test_no_ln_classes_verdict_mid_run_without_its_evidence_or_too_early() -> None:
    recent = [LN10] * 30
    # the class count unknown: never guessed from the loss
    assert run_live.stuck_at_ln_classes("s", LN10, recent, 500, None, "") is None
    # too few steps, or too few losses in the window
    assert run_live.stuck_at_ln_classes("s", LN10, recent,
                                        run_live.LIVE_LN_MIN_STEPS - 1, 10, "") is None
    assert run_live.stuck_at_ln_classes("s", LN10, recent[:run_live.LIVE_LN_WINDOW - 1],
                                        500, 10, "") is None


def test_a_loss_falling_through_ln_classes_or_come_down_to_it_is_not_stuck() -> None:
    # one value in the window outside the tolerance: not settled there
    passing = [LN10 + 0.2 - 0.01 * i for i in range(30)]
    assert run_live.stuck_at_ln_classes("s", 3.0, passing, 500, 10, "") is None
    # at ln 10 now, but fallen there from far above: learning, not stuck (yet)
    assert run_live.stuck_at_ln_classes("s", 5.0, [LN10] * 30, 500, 10, "") is None
