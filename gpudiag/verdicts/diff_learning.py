"""`gpudiag diff`'s learning (the judging is gpudiag.verdicts.diff's): the loss at the
steps both sides recorded, held against what run-to-run variation explains where the two
runs did not set the same seed; the diff.learning finding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gpudiag.layout.diff import LoopDiff
from gpudiag.layout.units import counted
from gpudiag.report import Finding
from gpudiag.rundir.records import Loop
from gpudiag.verdicts.stats import spread

LOSS_SAME = 0.05  # the loss at matched steps differs by at most 5 %: the same learning


def _matched(diffs: Sequence[LoopDiff]) -> list[LoopDiff]:
    return [d for d in diffs if d.loss_steps_matched and d.loss_max_rel_diff is not None]


def _loss_rows(matched: Sequence[LoopDiff]) -> str:
    """Each loop's last loss on both sides and how far apart at matched steps."""
    return "; ".join(f"{d.name_b}: last loss {d.loss_a_last:.4f} -> {d.loss_b_last:.4f}; "
                     f"over {counted(d.loss_steps_matched, 'matched step')} at most "
                     f"{d.loss_max_rel_diff:.1%} apart" for d in matched)


def learning_finding(diffs: Sequence[LoopDiff]) -> Finding:
    matched = _matched(diffs)
    if not matched:
        return Finding("diff.learning", "skip", "no loss at matching steps on both sides",
                       {}, title="no loss at matching steps on both sides")
    same = all((d.loss_max_rel_diff or 0) <= LOSS_SAME for d in matched)
    head = "the model learns the same" if same else "the loss differs: the change altered " \
        "what the model learns (or its data order)"
    worst = max(d.loss_max_rel_diff or 0.0 for d in matched)
    return Finding("diff.learning", "ok" if same else "warn", f"{head}: {_loss_rows(matched)}",
                   {"loops": [{"loop": d.name_b, "matched_steps": d.loss_steps_matched,
                               "max_rel_diff": d.loss_max_rel_diff} for d in matched],
                    "same_within": LOSS_SAME},
                   title=(f"the model learns the same: losses at most {worst:.1%} apart"
                          if same else f"the loss differs: up to {worst:.1%} apart at "
                          "matched steps"))


def _seeds_said(a: bool | None, b: bool | None) -> str:
    """Which side set no seed, in words ("" when both did)."""
    if a and b:
        return ""
    said = {False: "sets no seed", None: "does not record whether the program sets a seed"}
    if a == b:
        return "neither run sets a seed" if a is False else \
            "neither run records whether the program sets a seed"
    return "; ".join(f"run {n} {said[v]}" for n, v in (("A", a), ("B", b)) if not v)


def _end_level(loop: Loop) -> tuple[float, tuple[float, float], str] | None:
    """Where a loop's loss ends: the median of its last quarter with that median's interval
    (stats.spread), None with fewer than 3 losses."""
    losses = [v for _, v in sorted(loop.losses().items())]
    if len(losses) < 3:
        return None
    return spread(losses[-max(3, len(losses) // 4):])


def learning_against_noise(pairs: Sequence[tuple[Loop, Loop]], diffs: Sequence[LoopDiff],
                           seeded: tuple[bool | None, bool | None],
                           seeds: tuple[tuple[str, ...], tuple[str, ...]]) -> Finding:
    """diff.learning, held against what run-to-run variation explains. Two runs that set
    the same seed start from the same weights: a loss apart at matched steps beyond
    LOSS_SAME is the change's doing (learning_finding). Without a seed on both sides the
    initial weights and the data order differ from run to run, by as much as the 15 % a
    program once differed from its own fix at matched steps, and one run of each side does
    not measure that spread: a difference is said as such, ok when both losses end at the
    same level within their runs' own spread (their end levels' intervals overlap), else
    "cannot tell" (skip), never a warn."""
    f = learning_finding(diffs)
    noise = _seeds_said(*seeded)
    if not noise and seeds[0] and seeds[1] and seeds[0] != seeds[1]:
        noise = (f"the two runs set other seeds (A {', '.join(seeds[0])}; B "
                 f"{', '.join(seeds[1])})")
    evidence = {**f.evidence, "seeded_a": seeded[0], "seeded_b": seeded[1],
                "seeds_a": list(seeds[0]), "seeds_b": list(seeds[1])}
    if f.status == "skip" or not noise:
        return replace(f, evidence=evidence)
    ends = []
    for x, y in pairs:
        la, lb = _end_level(x), _end_level(y)
        if la is not None and lb is not None:
            ends.append((y.name, la, lb))
    evidence["end_levels"] = [{"loop": n, "a": [ea[0], *ea[1]], "b": [eb[0], *eb[1]],
                               "interval_from": ea[2]} for n, ea, eb in ends]
    levels = "; ".join(f"{n}: A ends at {ea[0]:.4f} ({ea[1][0]:.4f}-{ea[1][1]:.4f}), B at "
                       f"{eb[0]:.4f} ({eb[1][0]:.4f}-{eb[1][1]:.4f})" for n, ea, eb in ends)
    why = (f"{noise}: two runs differ by their initial weights and data order, and one run "
           "of each side does not measure by how much")
    if f.status == "ok":
        return replace(f, message=f"{f.message} ({why})", evidence=evidence)
    apart = _loss_rows(_matched(diffs))  # the numbers, not the words of f's verdict
    if ends and all(ea[1][0] <= eb[1][1] and eb[1][0] <= ea[1][1] for _, ea, eb in ends):
        return Finding("diff.learning", "ok", (
            f"the loss ends at the same level within each run's own spread ({levels}); at "
            f"matched steps it differs ({apart}), which {why} can explain"), evidence,
            title="the loss ends at the same level: within run-to-run noise")
    return Finding("diff.learning", "skip", title="cannot tell: no common seed, the loss gap "
                   "may be run-to-run noise", message=(
        f"cannot tell whether the change altered what the model learns: {apart}"
        + (f"; {levels}" if levels else "") + f"; {why}"), evidence=evidence,
        advice="Set the seed in both (keras.utils.set_random_seed(1) or "
               "tf.random.set_seed(1) before building the model) and run both again, or run "
               "each side several times to see the run-to-run spread.")
