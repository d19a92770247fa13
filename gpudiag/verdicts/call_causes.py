"""The step call's family of a slow step's causes: host-bound (the program's Python between
the step calls), launch-bound (a GPU waiting inside the step for the host to launch work),
overhead-bound (on the CPU, TensorFlow's own per-step work; an XLA-compiled step's
per-call cost), with their fixes: more steps a call (steps_per_execution at the program's
compile line, a loop inside the tf.function), XLA, a larger batch. The records and
thresholds are gpudiag.verdicts.step_causes'.
"""

from __future__ import annotations

from typing import Any

from gpudiag.layout.units import share as pct
from gpudiag.report import Action
from gpudiag.verdicts import stats
from gpudiag.verdicts.input_causes import floor_note, input_share
from gpudiag.verdicts.step_causes import (
    HOST_BOUND,
    INPUT_BOUND,
    LAUNCH_BOUND,
    OVERHEAD_BOUND,
    STEPS_PER_EXECUTION,
    Cause,
    Judged,
    ProgramFacts,
    ms,
    near_words,
    us,
)


def host_bound(j: Judged) -> Cause | None:
    m = j.m
    a = j.against(lambda s: s.host_between_calls_s, HOST_BOUND)
    if a.side == stats.BELOW:
        return None
    where, line = "", None
    if j.facts.called_at:
        at = j.facts.called_at
        line = f"{str(at['file']).rsplit('/', 1)[-1]}:{at['line']}"
        where = f" (the loop at {line})"
    gpu = " while the GPU waits" if j.gpu else ""
    what = ("the host after the step call returned, before the step's last work on the "
            "device (the program's Python around the call: the loop, logging, a Keras "
            "fit's per-batch callbacks)" if j.b.steps_from == "device Steps line" else
            "the program's Python between the step calls")
    return Cause("host-bound", m.share(m.host_between_calls_s),
                 f"host-bound: {pct(m.share(m.host_between_calls_s))} of the step "
                 f"({ms(m.host_between_calls_s)} of {ms(m.period_s)}) is {what}{gpu}"
                 f"{near_words(a)}",
                 f"move the per-step Python work between the calls of "
                 f"{j.facts.loop or 'the step'}{where} into the tf.function, or do it every "
                 "N steps (logging, metrics, .numpy() calls)" + (
                     "" if j.facts.loop else f"; Keras: {STEPS_PER_EXECUTION} (fit's "
                     "per-batch callbacks then run once per N steps)"),
                 {"against": a.to_dict()},
                 (Action(f"move the per-step Python work between the calls of "
                         f"{j.facts.loop or 'the step'} into the tf.function, or do it every "
                         "N steps", line),))


def _launch_text(j: Judged) -> str:
    stats = j.kernels()
    if not stats:
        return ""
    n = sum(s.kernels_per_step for s in stats) / len(stats)
    med = sum(s.median_kernel_s for s in stats) / len(stats)
    mean = sum(s.mean_kernel_s for s in stats) / len(stats)
    gap = sum(s.mean_gap_s for s in stats) / len(stats)
    return (f": {n:.0f} kernels per step, median {us(med)}, mean {us(mean)}, "
            f"{us(gap)} between kernels on average; the GPU runs kernels "
            f"{pct(j.m.share(j.m.compute_s))} of the step")


def launch_bound(j: Judged) -> Cause | None:
    m = j.m
    launch = m.launch_s
    a = j.against(lambda s: s.launch_s, LAUNCH_BOUND if j.gpu else OVERHEAD_BOUND)
    if j.gpu and a.side != stats.BELOW:
        return Cause("launch-bound", m.share(launch),
                     f"launch-bound: inside the step the GPU waits {pct(m.share(launch))} of "
                     f"the step ({ms(launch)} of {ms(m.period_s)}) for the host to launch "
                     f"work{_launch_text(j)}; tf.data is not waited for "
                     f"({pct(m.share(m.input_s))}){near_words(a)}",
                     "fewer, larger kernels: a larger batch; XLA (jit_compile=True in "
                     "compile() or tf.function) fuses the small ops; "
                     f"{more_steps(j.facts.loop)}", {"against": a.to_dict()},
                     (Action("XLA: jit_compile=True in compile() or on the tf.function",
                             _compile_line(j.facts.compile)),
                      Action(_more_steps_what(j.facts.loop), loop_line(j.facts))))
    if not j.gpu and a.side != stats.BELOW:
        text = (f"overhead-bound: in {pct(m.share(launch))} of the step ({ms(launch)} of "
                f"{ms(m.period_s)}) no op ran inside the step call: TensorFlow's own "
                "per-step work (calling the step function, scheduling its ops) "
                f"outweighs ops this small{near_words(a)}")
        n = _in_place(j.facts.compile) if j.facts.loop and "fit" in j.facts.loop else None
        if n is not None:
            return Cause("overhead-bound", m.share(launch), text + (
                f"; the program already runs {n} steps per execution (compile"
                f"{_compile_at(j.facts.compile)}): what is left is each step's own op "
                "scheduling inside the execution, which more steps per execution do not "
                "remove"), "a larger batch (more work per op), or XLA (jit_compile=True in "
                f"compile{_compile_at(j.facts.compile)}) to fuse the small ops; "
                f"steps_per_execution beyond {n} saves only the per-call part",
                {"steps_per_execution": n, "against": a.to_dict()},
                (Action("XLA: jit_compile=True in compile()", _compile_line(j.facts.compile)),))
        k = j.b.updates_per_call
        if k is not None and k >= LARGE_STEPS_PER_EXECUTION:
            return Cause("overhead-bound", m.share(launch), text + (
                f"; each call of {j.facts.loop or 'the step function'} already runs {k:.0f} "
                "training steps (a loop inside the tf.function): what is left is each "
                "step's own op scheduling, which more steps a call do not remove"),
                "a larger batch (more work per op), or XLA (jit_compile=True on the "
                "tf.function) to fuse the small ops",
                {"steps_per_call": k, "against": a.to_dict()},
                (Action("XLA: jit_compile=True on the tf.function"),))
        if _compiled_loop(j):  # the loop cannot go inside the XLA-compiled function
            advice, action = _outer_loop(j)
            return Cause("overhead-bound", m.share(launch), text,
                         f"{advice}; or a larger batch", {"against": a.to_dict()}, (action,))
        return Cause("overhead-bound", m.share(launch), text,
                     f"more work per step call: {more_steps(j.facts.loop, j.facts.compile)}; "
                     "or a larger batch", {"against": a.to_dict()},
                     (Action(_more_steps_what(j.facts.loop), loop_line(j.facts)),))
    return _xla_loop(j)


def _compiled_loop(j: Judged) -> bool:
    """A custom loop calling an XLA-compiled (jit_compile) step function."""
    return bool(j.facts.jit_compile and j.facts.loop and "fit" not in j.facts.loop)


def _outer_loop(j: Judged) -> tuple[str, Action]:
    """More steps a Python call around an XLA-compiled step: an outer tf.function without
    jit_compile (IteratorGetNext has no XLA kernel: a loop over the iterator inside the
    jit_compile function fails to compile, checked with the installed TensorFlow)."""
    step = str(j.facts.loop).split()[-1]
    return ("more steps per Python call: an outer tf.function without jit_compile that runs "
            f"N steps, `for _ in tf.range(N): {step}(*next(iterator))`, around the "
            "XLA-compiled step (the iterator's ops do not compile with XLA, so the loop goes "
            "outside it)",
            Action(f"call {step} N times a Python call: an outer tf.function (no jit_compile) "
                   f"looping `for _ in tf.range(N): {step}(*next(iterator))`",
                   loop_line(j.facts)))


def _xla_loop(j: Judged) -> Cause | None:
    """An XLA-compiled step called from a Python loop, its compiled work under half the
    step and its input not waited for: the rest is paid once a call (the Python loop,
    next(), entering the function), so more steps a call is the fix, in an outer
    tf.function (_outer_loop)."""
    m = j.m
    if not _compiled_loop(j):
        return None
    around = 1 - m.share(m.compute_s)
    share, _, near = input_share(j.facts, m)
    if around < OVERHEAD_BOUND or share >= INPUT_BOUND or near:
        return None  # the compiled work, or the input (its own cause), is the step
    floor = floor_note(j.facts)
    advice, action = _outer_loop(j)
    return Cause(
        "overhead-bound", around,
        f"overhead-bound: the XLA-compiled step's ops run {pct(m.share(m.compute_s))} of "
        f"the step ({ms(m.compute_s)} of {ms(m.period_s)}); the other {pct(around)} is paid "
        "once a call: the Python loop around it, next(iterator) and entering the compiled "
        "function" + (f" ({floor})" if floor else ""),
        f"{advice}; prefetch does not help a step that does not wait for its input",
        {"jit_compile": True, "around_share": around}, (action,))


def _compile_line(compiled: dict[str, Any] | None) -> str | None:
    at = (compiled or {}).get("caller")
    return f"{str(at['file']).rsplit('/', 1)[-1]}:{at['line']}" if at else None


def loop_line(facts: ProgramFacts) -> str | None:
    """The line that changes to run more steps a call: a fit's compile, else where the
    step function is called."""
    if facts.loop and "fit" in facts.loop:
        return _compile_line(facts.compile)
    at = facts.called_at
    return f"{str(at['file']).rsplit('/', 1)[-1]}:{at['line']}" if at else None


def _more_steps_what(loop: str | None) -> str:
    if loop and "fit" in loop:
        return "pass steps_per_execution=N to compile()"
    return f"run several steps in each call of {loop or 'the step function'}"


LARGE_STEPS_PER_EXECUTION = 8  # from here steps_per_execution is in place, not advised


def _compile_at(compiled: dict[str, Any] | None) -> str:
    at = (compiled or {}).get("caller")
    if not at:
        return ""
    code = f" (`{at['code']}`)" if at.get("code") else ""
    return f" at {str(at['file']).rsplit('/', 1)[-1]}:{at['line']}{code}"


def more_steps(loop: str | None, compiled: dict[str, Any] | None = None) -> str:
    loop_fix = (f"run several steps in each call of {loop or 'the step function'} (a loop "
                "over the iterator inside the tf.function)")
    if loop and "fit" in loop:
        return STEPS_PER_EXECUTION + _compile_at(compiled)
    return loop_fix if loop else f"Keras: {STEPS_PER_EXECUTION}; a custom loop: {loop_fix}"


def _in_place(compiled: dict[str, Any] | None) -> int | None:
    """The program's steps_per_execution when it is already large (None: not in place)."""
    n = (compiled or {}).get("steps_per_execution")
    return n if isinstance(n, int) and n >= LARGE_STEPS_PER_EXECUTION else None
