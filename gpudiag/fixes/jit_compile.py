"""``jit_compile=True`` passed to the advised ``Model.compile``: the train step compiled by
XLA, its small ops fused into fewer kernels. XLA may reorder and fuse floating-point work,
so what the model computes can change in its last bits (and more where an op has no exact
XLA twin): the loss at matching steps is compared. A step XLA cannot compile (an op it has
no kernel for) makes the trial fail: said as such, and that trial is dropped, never "the fix
broke the program"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpudiag.fixes.lines import Call, add_argument, at_line, calls_at
from gpudiag.records.trial import Fix, TrialFix

FIX = Fix("jit-compile", label="jit_compile",
          changes="jit_compile=True passed to the Model.compile at the line",
          advice="XLA: jit_compile=True in compile()", can_change_results=True)
ARGUMENT = "jit_compile=True"
#: Words of TensorFlow's errors when XLA cannot compile a graph: a trial that failed on one
#: did not compile, it did not break the program.
COMPILE_FAILURE = ("XLA", "Detected unsupported operations", "jit_compile", "XlaCompile",
                   "could not be compiled")


def choose(where: str | None, calls: Sequence[Call], predicted: Mapping[str, Any] | None
           ) -> TrialFix | None:
    """The compile at the line (no line said: the one compile recorded), unless it already
    asked for XLA."""
    compiles = calls_at(calls, where, "compile") if where else [
        c for c in calls if c.method == "compile"]
    if not compiles or (not where and len(compiles) > 1):
        return None
    if (compiles[0].args or {}).get("jit_compile") == "True":
        return None
    return TrialFix(FIX.name, "compile", compiles[0].file, compiles[0].line)


def rewrite(code: str, fix: TrialFix) -> str | None:
    return add_argument(code, "compile", ARGUMENT)


def apply(kwargs: dict[str, Any], fix: TrialFix) -> dict[str, Any]:
    return {**kwargs, "jit_compile": True}


def made(fix: TrialFix, calls: Sequence[Call]) -> bool:
    """Whether the trial's recorded compile at the line asked for XLA."""
    return any((c.args or {}).get("jit_compile") == "True"
               for c in at_line(calls, fix.file, fix.line, "compile"))


def did_not_compile(crash: str) -> bool:
    """Whether a trial's exception is XLA's failure to compile the step."""
    return any(w in crash for w in COMPILE_FAILURE)
