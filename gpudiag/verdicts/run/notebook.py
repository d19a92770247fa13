"""run.notebook: what gpudiag.watch() could not see of a notebook's training (pure).

watch() installs the hooks in a kernel that has usually imported TensorFlow, set up its
devices and built the model and the input pipeline in earlier cells. The hooks see calls
as they happen, so what was done before the block is not in the run: this finding says
which of it, from what was observed (never a guess), and what the hooks could not put back.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudiag.report import Finding
from gpudiag.verdicts.common import title


@dataclass(frozen=True)
class KernelSeen:
    """What watch() knows of the kernel around its block (all observed)."""

    imported_before: tuple[str, ...]  # tensorflow, keras, tf_keras already imported
    initialized_before: bool | None  # TensorFlow's devices set up before the block
    loops: int  # training loops the block ran
    dataset_calls: int  # tf.data calls made inside the block
    not_restored: tuple[str, ...] = ()  # attributes the program replaced again after gpudiag


def notebook(seen: KernelSeen) -> Finding:
    unseen: list[str] = []
    if "tensorflow" in seen.imported_before:
        unseen.append("TensorFlow's import (before the block): tf.config calls made before "
                      "it (visible devices, memory growth, virtual devices) are not in the run")
    if seen.initialized_before:
        unseen.append("how TensorFlow's devices were set up: they were initialised before "
                      "the block (the devices are recorded as they are)")
    if seen.loops and not seen.dataset_calls:
        unseen.append("the tf.data pipeline: no tf.data call was made inside the block, so "
                      "a fix to the input cannot name its line (build the dataset inside "
                      "the watched cell to get it)")
    evidence = {"imported_before": list(seen.imported_before),
                "initialized_before": seen.initialized_before, "loops": seen.loops,
                "dataset_calls": seen.dataset_calls, "unseen": unseen,
                "not_restored": list(seen.not_restored)}
    if seen.not_restored:
        return Finding("run.notebook", "warn",
                       "the kernel's code replaced what gpudiag had wrapped during the block, "
                       "so gpudiag left it as the kernel made it: "
                       + ", ".join(seen.not_restored), evidence,
                       advice="Restart the kernel to have TensorFlow's own functions again.",
                       title=title(f"the kernel replaced {len(seen.not_restored)} function(s) "
                                   "gpudiag had wrapped: left as it made them",
                                   "the kernel replaced functions gpudiag had wrapped"))
    if not unseen:
        return Finding("run.notebook", "ok", "watch() saw the training from TensorFlow's "
                       "import on; every hook was removed after the block", evidence,
                       title="watch() saw the whole training; every hook removed after it")
    return Finding("run.notebook", "ok", "watch() could not see what ran before its block: "
                   + "; ".join(unseen) + "; every hook was removed after the block", evidence,
                   advice="Import TensorFlow and build the model and the dataset inside the "
                          "watched cell (or restart the kernel first) for all of it.",
                   title=title(f"watch() could not see {len(unseen)} thing(s) set up before "
                               "its block", "watch() could not see what ran before its block"))
