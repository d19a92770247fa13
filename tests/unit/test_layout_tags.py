"""The program's TensorBoard tags (gpudiag.layout: loop_prefix, loop_tag, parse_loop_tag):
one rule that `gpudiag run` writes with and gpudiag.rundir reads back with."""

from __future__ import annotations

import pytest

from gpudiag import layout

LABELS = ["Model.fit", "tf.function train_step", "Session.run #2", "eager step a/b",
          "x" * 90, "  spaced  ", "tf.function 训练"]


@pytest.mark.parametrize("label", LABELS)
def test_a_loops_tags_parse_back_to_its_prefix(label: str) -> None:
    prefix = layout.loop_prefix(label)
    assert len(prefix) <= layout.LOOP_PREFIX_MAX and "/" not in prefix
    for tag in (layout.TAG_RUN_STEP_TIME, layout.TAG_RUN_LOSS, layout.TAG_RUN_EXAMPLES_PER_S):
        mine = layout.loop_tag(tag, prefix)
        assert layout.parse_loop_tag(mine) == (prefix, tag.rsplit("/", 1)[1])


def test_the_first_loop_has_the_plain_tags_and_other_tags_are_not_the_programs() -> None:
    assert layout.loop_tag(layout.TAG_RUN_LOSS, "") == "program/loss"
    assert layout.parse_loop_tag("program/loss") == ("", "loss")
    assert layout.loop_prefix("tf.function train_step") == "tf.function_train_step"
    assert layout.parse_loop_tag("gpudiag/run") is None
    assert layout.parse_loop_tag("program/") is None
