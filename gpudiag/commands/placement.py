"""`gpudiag placement`: run the placement probe in a child and judge its evidence."""

from __future__ import annotations

from gpudiag.layout import TAG_PLACEMENT
from gpudiag.markdown import markdown_table
from gpudiag.procs.runner import run_child
from gpudiag.readers.placementlog import is_work, op_counts_by_device, parse, split_sections
from gpudiag.records.results import PlacementConfig, PlacementResult
from gpudiag.session import RunSession
from gpudiag.ui import Ui
from gpudiag.verdicts import common as common_verdicts
from gpudiag.verdicts import placement as placement_verdicts

# The placement log is C++ INFO logging: without level 0 TensorFlow prints none of it.
PLACEMENT_ENV = {"TF_CPP_MIN_LOG_LEVEL": "0"}


def run(session: RunSession, *, timeout_s: float, virtual_gpus: int | None,
        memory_limit_mb: int, ui: Ui) -> None:
    config = PlacementConfig(virtual_gpus=virtual_gpus, memory_limit_mb=memory_limit_mb)
    with ui.status("running the placement probe in a child process ..."):
        child = run_child("placement", config, run_dir=session.run_dir, name="placement",
                          timeout_s=timeout_s, env=PLACEMENT_ENV)
    if not child.ok or child.result is None:
        session.add(common_verdicts.child_failed("placement.probe", "the placement probe", child))
        return
    result = PlacementResult.from_dict(child.result)
    setup = result.setup
    session.set("devices", setup)
    sections = {name: parse(text) for name, text in split_sections(child.stderr_text()).items()}
    rows = [row for section_rows in sections.values() for row in section_rows]
    session.set("placement", {
        "op_counts_by_device": op_counts_by_device(rows),
        "op_counts_by_section": {n: op_counts_by_device(r) for n, r in sections.items() if r},
        "rows": [r.to_dict() | {"section": n} for n, rs in sections.items() for r in rs],
        "log_file": str(child.stderr_path),
    })
    kind, host = setup["kind"], setup["host_device"]
    session.add(placement_verdicts.placement_log(rows, kind))
    session.add(placement_verdicts.default_device(sections.get("workload", []), kind, host))
    session.add(placement_verdicts.pinned(result.pinned, sections.get("pinned", [])))
    session.add(placement_verdicts.invalid_device(result.invalid_soft_off))
    session.add(placement_verdicts.soft_fallback(result.soft_on))
    session.add(placement_verdicts.no_gpu_kernel(result.no_gpu_kernel))
    session.add(placement_verdicts.multitower(result.multitower, sections.get("multitower", [])))
    table = markdown_table(
        ["section", "kind", "op", "type", "device", "function"],
        [[n, r.kind, r.op, r.op_type, r.device, r.function or ""]
         for n, rs in sections.items() for r in rs if is_work(r)],
    )
    session.text(TAG_PLACEMENT, table)
