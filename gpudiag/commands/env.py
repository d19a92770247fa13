"""`gpudiag env`: TensorFlow's view (in a child) beside NVML's view (in this process).

NVML comes in as ``backend`` (opened and closed by the caller: the CLI, with
gpudiag.nvml.opened); this module never opens or closes it.
"""

from __future__ import annotations

from typing import Any

from gpudiag import catalogue, nvml
from gpudiag.procs.runner import run_child
from gpudiag.records.results import EnvResult
from gpudiag.session import RunSession
from gpudiag.ui import Ui
from gpudiag.verdicts import common as common_verdicts
from gpudiag.verdicts import env as env_verdicts


def inventory(backend: nvml.NvmlBackend) -> dict[str, Any]:
    """NVML's device list as plain data; a failing device becomes an error entry."""
    devices: list[dict[str, Any]] = []
    for index in range(backend.device_count()):
        try:
            info = backend.device_info(index)
        except nvml.DeviceError as exc:
            devices.append({"index": index, "name": "?", "pci_bus_id": "?", "error": exc.reason})
            continue
        devices.append({
            "index": index,
            "name": nvml.or_none(info.name),
            "uuid": nvml.or_none(info.uuid),
            "pci_bus_id": nvml.or_none(info.pci_bus_id),
            "memory_total_bytes": nvml.or_none(info.memory_total_bytes),
        })
    return {"backend": backend.description, "devices": devices}


def run(session: RunSession, *, backend: nvml.NvmlBackend | nvml.NvmlUnavailable,
        timeout_s: float, ui: Ui) -> None:
    if isinstance(backend, nvml.NvmlUnavailable):
        nvml_info, nvml_reason = None, backend.reason
    else:
        nvml_info, nvml_reason = inventory(backend), None
    # TF_CPP_MIN_LOG_LEVEL=0: TensorFlow's own words on why a GPU was not registered.
    with ui.status("probing TensorFlow in a child process ..."):
        child = run_child("env", {}, run_dir=session.run_dir, name="env", timeout_s=timeout_s,
                          env={"TF_CPP_MIN_LOG_LEVEL": "0"})
    session.set("environment", {"nvml": nvml_info, "nvml_unavailable_reason": nvml_reason,
                                "tensorflow": child.result if child.ok else None})
    if not child.ok or child.result is None:
        session.add(common_verdicts.child_failed("env.tensorflow", "importing TensorFlow", child))
        return
    tf_info = EnvResult.from_dict(child.result)
    session.set("devices", {
        "summary": f"{len(tf_info.physical_gpus)} GPU(s) visible to TensorFlow; logical: "
                   + ", ".join(d["name"] for d in tf_info.logical_devices),
        "physical_devices": tf_info.physical_devices,
        "physical_gpus": tf_info.physical_gpus,
        "logical_devices": tf_info.logical_devices,
    })
    gpu_log = catalogue.gpu_log_lines(child.stderr_text())
    for finding in env_verdicts.env_findings(tf_info, nvml_info, nvml_reason, gpu_log):
        session.add(finding)
