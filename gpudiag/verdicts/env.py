"""Verdicts of `gpudiag env`: the TensorFlow build, NVML's inventory, the GPUs each sees.

Evidence: the env probe's result (gpudiag/probes/env.py), NVML's device list from the
parent (or why NVML is absent), and TensorFlow's own log lines about GPU registration.
"""

from __future__ import annotations

from typing import Any

from gpudiag.catalogue import libraries_not_loaded
from gpudiag.nvml.mapping import parse_cuda_visible_devices
from gpudiag.records.results import EnvResult
from gpudiag.report import Action, Finding
from gpudiag.verdicts.common import title


def visible_count(cuda_visible_devices: str | None, physical: int) -> int:
    """How many of ``physical`` GPUs CUDA_VISIBLE_DEVICES leaves visible, by CUDA's rules
    (gpudiag.nvml.mapping.parse_cuda_visible_devices: unset = all, ``-1`` = none)."""
    visible = parse_cuda_visible_devices(cuda_visible_devices, device_count=physical)
    return physical if visible is None else min(len(visible), physical)


def env_findings(
    tf_info: EnvResult,
    nvml_info: dict[str, Any] | None,
    nvml_reason: str | None,
    gpu_log: list[str],
) -> list[Finding]:
    """Findings of `gpudiag env` from the TF probe, NVML's inventory (or why it is absent)."""
    nvml_gpus = len(nvml_info["devices"]) if nvml_info else None
    return [
        _tensorflow_finding(tf_info, nvml_gpus),
        _nvml_finding(nvml_info, nvml_reason, nvml_gpus),
        _tf_gpus_finding(tf_info, nvml_gpus, gpu_log),
        *_visibility_findings(tf_info, nvml_gpus),
        *_horovod_findings(tf_info),
    ]


def _tensorflow_finding(tf_info: EnvResult, nvml_gpus: int | None) -> Finding:
    """env.tensorflow: whether the TensorFlow build can use a GPU at all."""
    build = tf_info.build_info
    if build.get("is_cuda_build"):
        return Finding(
            "env.tensorflow", "ok",
            f"TensorFlow {tf_info.tf_version} is a CUDA build (CUDA "
            f"{build.get('cuda_version')}, cuDNN {build.get('cudnn_version')}, compute "
            f"capabilities {', '.join(build.get('cuda_compute_capabilities') or [])})",
            {"tf_version": tf_info.tf_version, "build_info": build},
            title=title(f"TensorFlow {tf_info.tf_version}: a CUDA build (CUDA "
                        f"{build.get('cuda_version')}, cuDNN {build.get('cudnn_version')})",
                        "TensorFlow is a CUDA build"),
        )
    return Finding(
        "env.tensorflow", "fail" if nvml_gpus else "warn",
        f"TensorFlow {tf_info.tf_version} is a CPU-only build: it can never use a GPU"
        + (f", yet NVML sees {nvml_gpus} GPU(s)" if nvml_gpus else ""),
        {"tf_version": tf_info.tf_version, "build_info": build,
         "nvml_gpu_count": nvml_gpus},
        title=title(f"TensorFlow {tf_info.tf_version} is a CPU-only build: it cannot use a GPU"
                    + (f" (NVML sees {nvml_gpus})" if nvml_gpus else ""),
                    "TensorFlow is a CPU-only build: it cannot use a GPU"),
        actions=(Action("pip install 'tensorflow[and-cuda]' (Linux)"),),
        advice="Install a CUDA build: `pip install 'tensorflow[and-cuda]'` (or gpudiag's "
               "`cuda` extra) on Linux.",
    )


def _nvml_finding(
    nvml_info: dict[str, Any] | None, nvml_reason: str | None, nvml_gpus: int | None
) -> Finding:
    """env.nvml: NVML's inventory, or why NVML is absent."""
    if nvml_info is None:
        return Finding(
            "env.nvml", "skip", f"NVML is not available: {nvml_reason}",
            {"reason": nvml_reason},
            title="NVML is not available: the driver's side is not checked",
            advice="Without NVML gpudiag cannot confirm from the driver's side that GPUs "
                   "worked; install the NVIDIA driver (libnvidia-ml.so) where there is a GPU.",
        )
    names = ", ".join(f"{d['index']}: {d['name']} ({d['pci_bus_id']})"
                      for d in nvml_info["devices"])
    return Finding(
        "env.nvml", "ok",
        f"NVML initialised ({nvml_info.get('backend')}): {nvml_gpus} GPU(s)"
        + (f": {names}" if names else ""),
        dict(nvml_info),
        title=f"NVML sees {nvml_gpus} GPU(s)",
    )


def _tf_gpus_finding(tf_info: EnvResult, nvml_gpus: int | None, gpu_log: list[str]) -> Finding:
    """env.tf-gpus: the GPUs TensorFlow registered, or none (and whether NVML saw some)."""
    tf_gpus = len(tf_info.physical_gpus)
    gpu_evidence = {"tf_physical_gpus": tf_info.physical_gpus, "nvml_gpu_count": nvml_gpus,
                    "CUDA_VISIBLE_DEVICES": tf_info.env.get("CUDA_VISIBLE_DEVICES"),
                    "tf_log": gpu_log}
    if tf_gpus:
        listing = ", ".join(
            f"{g['name']} ({g.get('device_name', '?')}, compute capability "
            f"{'.'.join(str(x) for x in g.get('compute_capability') or []) or '?'})"
            for g in tf_info.physical_gpus)
        first = tf_info.physical_gpus[0].get("device_name") or "?"
        return Finding("env.tf-gpus", "ok", f"TensorFlow sees {tf_gpus} GPU(s): {listing}",
                       gpu_evidence, title=title(f"TensorFlow sees {tf_gpus} GPU(s) ({first})",
                                                 f"TensorFlow sees {tf_gpus} GPU(s)"))
    skipped = _skipped_for(gpu_log)
    if nvml_gpus:
        return Finding(
            "env.tf-gpus", "fail",
            f"TensorFlow sees no GPU although NVML sees {nvml_gpus}" + skipped,
            gpu_evidence,
            title=title(f"TensorFlow sees no GPU although NVML sees {nvml_gpus}" + skipped,
                        f"TensorFlow sees no GPU although NVML sees {nvml_gpus}"),
            advice="Read the tf_log lines in the evidence: usually missing CUDA/cuDNN libraries "
                   "(install tensorflow[and-cuda]) or a driver older than the CUDA build needs.",
        )
    if skipped:
        return Finding("env.tf-gpus", "fail", "TensorFlow sees no GPU" + skipped, gpu_evidence,
                       title=title("TensorFlow sees no GPU" + skipped,
                                   "TensorFlow skipped registering its GPUs"),
                       advice="Install the libraries named (`pip install "
                              "'tensorflow[and-cuda]'` brings the CUDA and cuDNN ones TensorFlow "
                              "was built with) or put their directory on LD_LIBRARY_PATH.")
    return Finding(
        "env.tf-gpus", "warn",
        "TensorFlow sees no GPU; gpudiag's probes will run on virtual CPU devices",
        gpu_evidence,
        title="no GPU: TensorFlow sees none; probes run on virtual CPUs",
        advice="If this machine should have a GPU, check the driver (`nvidia-smi`) and the "
               "tf_log lines in the evidence.",
    )


def _skipped_for(gpu_log: list[str]) -> str:
    """``: it skipped registering its GPUs, libcudnn.so.8 not loaded`` from TensorFlow's own
    lines (gpu_device.cc's "Skipping registering GPU devices...", the dlopen lines before
    it), or "" where it did not say."""
    if not any("Skipping registering GPU devices" in ln for ln in gpu_log):
        return ""
    libraries = libraries_not_loaded(gpu_log)
    return ": it skipped registering its GPUs" + (
        f", {', '.join(libraries)} not loaded" if libraries else "")


def _visibility_findings(tf_info: EnvResult, nvml_gpus: int | None) -> list[Finding]:
    """env.cuda-visible-devices and env.gpu-count: GPUs hidden by CUDA_VISIBLE_DEVICES, and
    visible GPUs TensorFlow skipped (only with NVML's count to compare with)."""
    if nvml_gpus is None:
        return []
    out: list[Finding] = []
    tf_gpus = len(tf_info.physical_gpus)
    cvd = tf_info.env.get("CUDA_VISIBLE_DEVICES")
    visible = visible_count(cvd, nvml_gpus)
    evidence = {"nvml_gpu_count": nvml_gpus, "visible_by_cuda_visible_devices": visible,
                "CUDA_VISIBLE_DEVICES": cvd, "tf_gpu_count": tf_gpus}
    if visible < nvml_gpus:
        out.append(Finding(
            "env.cuda-visible-devices", "warn",
            f"CUDA_VISIBLE_DEVICES={cvd!r} hides {nvml_gpus - visible} of {nvml_gpus} GPU(s)",
            evidence,
            title=title(f"CUDA_VISIBLE_DEVICES={cvd!r} hides {nvml_gpus - visible} of "
                        f"{nvml_gpus} GPU(s)", f"CUDA_VISIBLE_DEVICES hides "
                        f"{nvml_gpus - visible} of {nvml_gpus} GPU(s)"),
            advice="Unset CUDA_VISIBLE_DEVICES or list every GPU index to use them all.",
        ))
    if tf_info.build_info.get("is_cuda_build") and tf_gpus and tf_gpus < visible:
        out.append(Finding(
            "env.gpu-count", "fail",
            f"TensorFlow sees {tf_gpus} GPU(s) but {visible} are visible to CUDA",
            evidence,
            title=f"TensorFlow sees {tf_gpus} GPU(s) but {visible} are visible to CUDA",
            advice="A GPU TensorFlow skips is usually one whose compute capability the build "
                   "does not support, or one in use exclusively by another process.",
        ))
    return out


# Horovod's last release (0.28.1) predates TensorFlow 2.16, whose tf.keras is Keras 3:
# horovod.tensorflow.keras wraps Keras 2 optimizers and its ops are built against the
# TensorFlow of their time.
HOROVOD_LAST_TF = (2, 15)


def _version(text: str) -> tuple[int, int] | None:
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def _horovod_findings(tf_info: EnvResult) -> list[Finding]:
    """env.horovod: Horovod installed beside a TensorFlow newer than any it was released
    for (nothing said where Horovod is not installed)."""
    hvd = tf_info.horovod_version
    if hvd is None:
        return []
    tf = _version(tf_info.tf_version)
    evidence = {"horovod_version": hvd, "tf_version": tf_info.tf_version}
    if tf is None or tf <= HOROVOD_LAST_TF:
        return [Finding("env.horovod", "ok", f"Horovod {hvd} with TensorFlow "
                        f"{tf_info.tf_version}: a TensorFlow of Horovod's time", evidence,
                        title=f"Horovod {hvd} with TensorFlow {tf_info.tf_version}")]
    return [Finding(
        "env.horovod", "warn",
        f"Horovod {hvd} is installed with TensorFlow {tf_info.tf_version}: Horovod's last "
        "release predates TensorFlow 2.16 (tf.keras is Keras 3 from then on); its "
        "TensorFlow ops and its Keras optimizer wrapper were built for TensorFlow 2.15 and "
        "earlier",
        evidence, title=title(f"Horovod {hvd} with TensorFlow {tf_info.tf_version}: "
                              "no Horovod release supports it", "Horovod with TensorFlow "
                              ">= 2.16: no Horovod release supports it"),
        actions=(Action("tf.distribute.MultiWorkerMirroredStrategy in place of Horovod"),),
        advice="Use tf.distribute.MultiWorkerMirroredStrategy (one process per machine, "
               "TF_CONFIG naming the workers; `gpudiag scaling --workers` tries it), or pin "
               "tensorflow<2.16 with tf_keras for Horovod.")]
