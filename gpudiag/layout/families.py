"""The finding families, declared once: each family's id, the question it answers, the type
of its evidence record where a reader downstream uses its fields, and (by its id) its row
in docs/findings.md.

A finding's id is its family's id, optionally followed by a suffix that names what it is
about (``run.devices.p1234``: one process; ``scaling.efficiency.mirrored``: one strategy;
``explain.bottleneck.host1``: one trace). ``<name>`` in a family's id stands for a
suffix that is always there. The family of an id is the longest family id that is the id
itself or a dot-separated prefix of it.

A new family is one entry here, the verdict that makes it, its test and its prose in
scripts/findings.toml (scripts/findings_doc.py writes docs/findings.md from both;
tests/unit/test_families.py holds the registry and docs/findings.md to each other, and checks
that every finding a command writes belongs to a family). The terminal, the Text tab, the
GPUDIAG tab and `gpudiag diff` read the question from here (through ``Finding.question``),
never from words in an id.

Pure and a leaf: imports nothing of gpudiag's, so that gpudiag.report and the readers can
use it (TensorBoard's per-plugin ``metadata.py``, nvitop's declared ``SNAPSHOT_KEYS``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

Question = Literal["devices", "why_slow", "learning", "scaling", "did_the_fix_work",
                   "program", "environment"]

#: The questions, in the order a person asks them and the tab shows them, with the words
#: the tab and the Text card use for each.
QUESTIONS: dict[Question, str] = {
    "devices": "Which devices worked?",
    "why_slow": "Why is a step slow?",
    "learning": "Is it learning?",
    "scaling": "Did more devices help?",
    "did_the_fix_work": "Did the fix work?",
    "program": "What did the program do?",
    "environment": "Is the set-up right?",
}

#: A finding's title (the answer itself) fits one line of the verdict (80 columns) with
#: its status word before it.
TITLE_MAX = 72


@dataclass(frozen=True)
class Family:
    """One kind of finding. ``id``: as docs/findings.md spells it (``<name>``: a suffix that
    is always there); ``evidence``: the name of its typed evidence record (decoded
    by load_run), where readers downstream use the evidence's fields (None: the
    evidence is shown, not read)."""

    id: str
    question: Question
    evidence: str | None = None

    @property
    def base(self) -> str:
        """The id up to its first placeholder: ``scaling.efficiency.<strategy>`` ->
        ``scaling.efficiency`` (empty for ``<command>.error``, which ``family_of`` matches
        by its shape)."""
        return "" if self.id.startswith("<") else self.id.split(".<", 1)[0]


def _fam(question: Question, *ids: str, evidence: str | None = None) -> list[Family]:
    return [Family(i, question, evidence) for i in ids]


FAMILIES: tuple[Family, ...] = (
    # gpudiag env
    *_fam("environment", "env.tensorflow", "env.nvml", "env.horovod"),
    *_fam("devices", "env.tf-gpus", "env.cuda-visible-devices", "env.gpu-count"),
    # gpudiag placement
    *_fam("environment", "placement.log", "placement.probe"),
    *_fam("devices", "placement.default-device", "placement.pinned",
          "placement.invalid-device", "placement.soft-fallback", "placement.no-gpu-kernel",
          "placement.multitower"),
    # gpudiag monitor
    *_fam("program", "monitor.command"),
    *_fam("environment", "monitor.nvml"),
    *_fam("devices", "monitor.every-gpu-used", evidence="GpuUse"),
    *_fam("why_slow", "monitor.sm-utilization"),
    # gpudiag memory
    *_fam("devices", "memory.default", "memory.growth", "memory.growth-env", "memory.limit",
          "memory.modify-after-init", "memory.cpu"),
    # gpudiag scaling
    *_fam("devices", "scaling.devices-worked.<config>", "scaling.nvml",
          "scaling.devices"),
    *_fam("scaling", "scaling.efficiency.<strategy>", evidence="Scaling"),
    *_fam("scaling", "scaling.towers-vs-mirrored", "scaling.allreduce"),
    *_fam("learning", "scaling.learning"),
    *_fam("why_slow", "scaling.bottleneck.<config>", evidence="Bottleneck"),
    *_fam("program", "scaling.run.<config>"),
    # gpudiag scaling --workers, gpudiag worker
    *_fam("program", "cluster.run.<config>", "cluster.tf-message.<id>"),
    *_fam("devices", "cluster.worker.<task>", "cluster.nvml"),
    *_fam("scaling", "cluster.scaling.<mode>-b<batch>", "cluster.batch.<mode>",
          "cluster.sync-vs-ps"),
    *_fam("environment", "cluster.listen"),
    *_fam("why_slow", "cluster.bottleneck.<config>", evidence="Bottleneck"),
    # gpudiag explain
    *_fam("why_slow", "explain.bottleneck", evidence="Bottleneck"),
    # gpudiag diff
    *_fam("did_the_fix_work", "diff.step-time.<loop>", evidence="DiffStep"),
    *_fam("did_the_fix_work", "diff.bottleneck.<finding>", "diff.learning", "diff.devices",
          "diff.findings", "diff.scaling", "diff.not-compared", "diff.caveats"),
    # gpudiag try
    *_fam("did_the_fix_work", "try.fix.<fix>", evidence="TriedFix"),
    *_fam("did_the_fix_work", "try.result", "try.not-tried"),
    # gpudiag run
    *_fam("program", "run.memory-over-calls"),
    *_fam("program", "run.command", "run.terminal", "run.stall", "run.peers", "run.crash",
          "run.saved-output", "run.descendants", "run.analysis"),
    *_fam("environment", "run.tensorflow", "run.tf-log", "run.nvml"),
    *_fam("devices", "run.devices", "run.distribution", "run.placement", "run.soft-placement",
          "run.memory", "run.session-config"),
    *_fam("devices", "run.every-device-used", evidence="DeviceLanes"),
    *_fam("devices", "run.every-gpu-used", evidence="GpuUse"),
    *_fam("learning", "run.learning", evidence="Learning"),
    *_fam("learning", "run.finite-loss", "run.loss-setup"),
    *_fam("why_slow", "run.bottleneck", evidence="Bottleneck"),
    *_fam("why_slow", "run.throughput", "run.gpu-idle", "run.profile", "run.retracing",
          "run.eager-loop", "run.callbacks", "run.sm-utilization", "run.precision",
          "run.keras-calls", "run.model-rebuilt", "run.host-sync", "run.debug-mode"),
    *_fam("scaling", "run.cluster", "run.strategy"),
    *_fam("program", "run.notebook"),
    # any command: bad input found after its run directory was made (gpudiag.session)
    *_fam("program", "<command>.error"),
)


@functools.cache
def _by_base() -> dict[str, Family]:
    table: dict[str, Family] = {}
    for family in FAMILIES:
        if not family.base:
            continue
        if family.base in table:
            raise ValueError(f"finding family {family.base} is declared twice")
        table[family.base] = family
    return table


def family_of(finding_id: str) -> Family | None:
    """The family of ``finding_id`` (None: no family declares it)."""
    table = _by_base()
    parts = finding_id.split(".")
    if len(parts) == 2:  # <command>.error, said by any command
        for family in FAMILIES:
            if not family.base and family.id.split(".", 1)[1] == parts[1]:
                return family
    for n in range(len(parts), 0, -1):
        found = table.get(".".join(parts[:n]))
        if found is not None:
            exact = n == len(parts)
            if exact and found.base != found.id:  # a placeholder that is not there
                return None
            return found
    return None


def question_of(finding_id: str) -> Question | None:
    family = family_of(finding_id)
    return family.question if family else None
