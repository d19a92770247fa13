"""Verdicts: pure functions from plain evidence to findings.

No TensorFlow, no NVML, no I/O here: each function takes plain data (dicts, lists,
numbers, parsed rows) and returns Finding records, so every rule is tested with plain
data. Finding ids are stable; docs/findings.md explains each and what to do about it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpudiag.nvml import NOT_AVAILABLE, DeviceSummary, NotAvailable, SamplingResult, or_none
from gpudiag.placementlog import PlacementRow, is_work, op_counts_by_device
from gpudiag.report import Finding
from gpudiag.runner import ChildResult


def child_failed(check_id: str, what: str, child: ChildResult) -> Finding:
    """A probe's child process crashed, hung or raised: a fail with its stderr tail."""
    return Finding(
        check_id, "fail",
        f"{what} did not complete: {child.error}",
        child.evidence(),
        advice=f"Read the child's whole output in {child.stderr_path}; rerun with a longer "
               "--timeout if it was only slow.",
    )


# ---------------------------------------------------------------- placement


def placement_log(rows: list[PlacementRow], kind: str) -> Finding:
    """The placement log was captured and parsed; per-device op counts as evidence."""
    counts = op_counts_by_device(rows)
    if not counts:
        return Finding(
            "placement.log", "fail",
            "TensorFlow's device-placement log was empty: no op placements could be read",
            {"rows": len(rows)},
            advice="The log is C++ INFO logging: make sure nothing forces TF_CPP_MIN_LOG_LEVEL "
                   "above 0 and that set_log_device_placement(True) runs before devices "
                   "are initialised.",
        )
    eager = sum(1 for r in rows if r.kind == "eager" and is_work(r))
    graph = sum(1 for r in rows if r.kind == "graph" and is_work(r))
    listing = ", ".join(f"{d}: {n}" for d, n in counts.items())
    return Finding(
        "placement.log", "ok",
        f"placement log parsed: {eager} eager ops and {graph} tf.function nodes ({listing})",
        {"op_counts_by_device": counts, "eager_ops": eager, "graph_nodes": graph,
         "device_kind": kind},
    )


def default_device(rows: list[PlacementRow], kind: str, host: str) -> Finding:
    """Where unpinned work went: on a GPU machine it must be a GPU, not the CPU."""
    counts = op_counts_by_device(rows)
    gpu_ops = sum(n for d, n in counts.items() if ":GPU:" in d)
    cpu_ops = sum(n for d, n in counts.items() if ":CPU:" in d)
    evidence = {"op_counts_by_device": counts, "device_kind": kind}
    if kind == "virtual-cpu":
        return Finding(
            "placement.default-device", "warn",
            f"no GPU visible to TensorFlow: all {cpu_ops} unpinned ops ran on the CPU ({host})",
            evidence,
            advice="Run `gpudiag env`: it says whether a GPU exists (NVML), whether this "
                   "TensorFlow build has CUDA, and whether CUDA_VISIBLE_DEVICES hides devices.",
        )
    if gpu_ops == 0:
        return Finding(
            "placement.default-device", "fail",
            f"TensorFlow sees a GPU but placed all {cpu_ops} unpinned ops on the CPU",
            evidence,
            advice="Look for tf.device('/cpu:0') scopes around the model and for ops without "
                   "GPU kernels; run `gpudiag env` for the CUDA build and driver.",
        )
    share = gpu_ops / max(1, gpu_ops + cpu_ops)
    return Finding(
        "placement.default-device", "ok",
        f"unpinned work went to the GPU: {gpu_ops} of {gpu_ops + cpu_ops} ops ({share:.0%})",
        evidence,
    )


def pinned(result: dict[str, Any], rows: list[PlacementRow]) -> Finding:
    """Ops pinned with tf.device land where pinned, eagerly and in a tf.function graph."""
    mismatches = [
        f"eager matmul pinned to {p['requested']} ran on {p['actual']}"
        for p in result["eager"] if p["actual"] != p["requested"]
    ]
    graph = {r.op: r.device for r in rows if r.kind == "graph"}
    for node, target in result["graph_nodes"].items():
        seen = graph.get(node)
        if seen is None:
            mismatches.append(f"graph node {node} (pinned to {target}) missing from the log")
        elif seen != target:
            mismatches.append(f"graph node {node} pinned to {target} placed on {seen}")
    evidence = {"targets": result["targets"], "eager": result["eager"],
                "graph_nodes_seen": {n: graph.get(n) for n in result["graph_nodes"]}}
    if mismatches:
        return Finding("placement.pinned", "fail",
                       f"{len(mismatches)} pinned op(s) did not land where pinned: "
                       + "; ".join(mismatches), evidence,
                       advice="Soft placement moves ops whose device has no kernel for them; "
                              "check the device names (`gpudiag env` lists the logical devices).")
    return Finding("placement.pinned", "ok",
                   f"ops pinned to {', '.join(result['targets'])} ran there, eagerly and "
                   "inside a tf.function", evidence)


def invalid_device(result: dict[str, Any]) -> Finding:
    """Soft placement off: pinning to a device that does not exist must raise."""
    requested = result["requested"]
    if result["raised"]:
        return Finding(
            "placement.invalid-device", "ok",
            f"with soft placement off, pinning to {requested} (which does not exist) raised "
            f"{result['error_type']}: {result['message']}",
            dict(result),
        )
    return Finding(
        "placement.invalid-device", "fail",
        f"with soft placement off, pinning to non-existent {requested} did not raise; the op "
        f"ran on {result['actual']}",
        dict(result),
        advice="tf.config.set_soft_device_placement(False) did not take effect; something "
               "re-enables soft placement.",
    )


def soft_fallback(result: dict[str, Any], host: str) -> Finding:
    """Soft placement on: the same pin falls back to an existing device."""
    actual, requested = result["actual"], result["requested"]
    if actual and actual != requested:
        return Finding(
            "placement.soft-fallback", "ok",
            f"with soft placement on, the op pinned to non-existent {requested} fell back to "
            f"{actual}",
            dict(result),
        )
    return Finding("placement.soft-fallback", "fail",
                   f"with soft placement on, the op pinned to {requested} reported device "
                   f"{actual!r}", dict(result))


def no_gpu_kernel(result: dict[str, Any] | None) -> Finding:
    """An op without a GPU kernel pinned to a GPU falls back to the CPU (GPU machines only)."""
    if result is None:
        return Finding("placement.no-gpu-kernel", "skip",
                       "no GPU visible to TensorFlow, so an op without a GPU kernel cannot be "
                       "pinned to one", {})
    if ":CPU:" in result["actual"]:
        return Finding("placement.no-gpu-kernel", "ok",
                       f"{result['op']} (no GPU kernel) pinned to {result['requested']} fell "
                       f"back to {result['actual']}", dict(result))
    return Finding("placement.no-gpu-kernel", "fail",
                   f"{result['op']} pinned to {result['requested']} reported {result['actual']}, "
                   "not the CPU", dict(result))


def multitower(result: dict[str, Any], rows: list[PlacementRow]) -> Finding:
    """The same matmul on every device, add_n on the host: value right, parts placed right."""
    towers, host = result["towers"], result["host"]
    matmuls = {r.op: r.device for r in rows if r.kind == "graph" and r.op_type == "MatMul"}
    addn = [r.device for r in rows if r.kind == "graph" and r.op_type == "AddN"]
    problems = []
    for i, target in enumerate(towers):
        seen = matmuls.get(f"tower_{i}/MatMul")
        if seen != target:
            problems.append(f"tower_{i}/MatMul on {seen}, expected {target}")
    if addn != [host]:
        problems.append(f"add_n on {addn}, expected [{host}]")
    if not result["value_ok"]:
        problems.append(f"sum wrong: max relative error {result['max_relative_error']:.3g}")
    evidence = {"towers": towers, "matmul_devices": matmuls, "add_n_devices": addn,
                "max_relative_error": result["max_relative_error"]}
    if problems:
        return Finding("placement.multitower", "fail",
                       "multi-tower matmul: " + "; ".join(problems), evidence,
                       advice="Each tower's ops must sit under its own tf.device scope; the "
                              "sum belongs on the host.")
    return Finding(
        "placement.multitower", "ok",
        f"multi-tower matmul ran one tower on each of {len(towers)} devices and add_n summed "
        f"them on {host}; the sum matches numpy (max relative error "
        f"{result['max_relative_error']:.1e})",
        evidence,
    )


# ---------------------------------------------------------------- env

_GPU_LOG_HINTS = ("cuda", "cudnn", "dlopen", "gpu will not be used", "skipping registering gpu",
                  "cuinit", "nvidia")


def gpu_log_lines(stderr: str, limit: int = 8) -> list[str]:
    """The lines of a TensorFlow stderr that explain why GPUs were (not) registered."""
    lines = [ln.strip() for ln in stderr.splitlines()
             if any(h in ln.lower() for h in _GPU_LOG_HINTS)]
    return lines[:limit]


def visible_count(cuda_visible_devices: str | None, physical: int) -> int:
    """How many of ``physical`` GPUs CUDA_VISIBLE_DEVICES leaves visible (CUDA's rules:
    unset = all; entries are parsed up to the first invalid one)."""
    if cuda_visible_devices is None:
        return physical
    count = 0
    for entry in cuda_visible_devices.split(","):
        entry = entry.strip()
        if not entry:
            break
        if entry.isdigit() and int(entry) >= physical:
            break
        count += 1
    return min(count, physical)


def env_findings(
    tf_info: dict[str, Any],
    nvml_info: dict[str, Any] | None,
    nvml_reason: str | None,
    gpu_log: list[str],
) -> list[Finding]:
    """Findings of `gpudiag env` from the TF probe, NVML's inventory (or why it is absent)."""
    out: list[Finding] = []
    build = tf_info["build_info"]
    tf_gpus = len(tf_info["physical_gpus"])
    cvd = tf_info["env"].get("CUDA_VISIBLE_DEVICES")
    nvml_gpus = len(nvml_info["devices"]) if nvml_info else None
    cuda_build = bool(build.get("is_cuda_build"))

    if cuda_build:
        out.append(Finding(
            "env.tensorflow", "ok",
            f"TensorFlow {tf_info['tf_version']} is a CUDA build (CUDA "
            f"{build.get('cuda_version')}, cuDNN {build.get('cudnn_version')}, compute "
            f"capabilities {', '.join(build.get('cuda_compute_capabilities') or [])})",
            {"tf_version": tf_info["tf_version"], "build_info": build},
        ))
    else:
        out.append(Finding(
            "env.tensorflow", "fail" if nvml_gpus else "warn",
            f"TensorFlow {tf_info['tf_version']} is a CPU-only build: it can never use a GPU"
            + (f", yet NVML sees {nvml_gpus} GPU(s)" if nvml_gpus else ""),
            {"tf_version": tf_info["tf_version"], "build_info": build,
             "nvml_gpu_count": nvml_gpus},
            advice="Install a CUDA build: `pip install 'tensorflow[and-cuda]'` (or gpudiag's "
                   "`cuda` extra) on Linux.",
        ))

    if nvml_info is None:
        out.append(Finding(
            "env.nvml", "skip", f"NVML is not available: {nvml_reason}",
            {"reason": nvml_reason},
            advice="Without NVML gpudiag cannot confirm from the driver's side that GPUs "
                   "worked; install the NVIDIA driver (libnvidia-ml.so) where there is a GPU.",
        ))
    else:
        names = ", ".join(f"{d['index']}: {d['name']} ({d['pci_bus_id']})"
                          for d in nvml_info["devices"])
        out.append(Finding(
            "env.nvml", "ok",
            f"NVML initialised ({nvml_info.get('backend')}): {nvml_gpus} GPU(s)"
            + (f": {names}" if names else ""),
            dict(nvml_info),
        ))

    gpu_evidence = {"tf_physical_gpus": tf_info["physical_gpus"], "nvml_gpu_count": nvml_gpus,
                    "CUDA_VISIBLE_DEVICES": cvd, "tf_log": gpu_log}
    if tf_gpus:
        listing = ", ".join(
            f"{g['name']} ({g.get('device_name', '?')}, compute capability "
            f"{'.'.join(str(x) for x in g.get('compute_capability') or []) or '?'})"
            for g in tf_info["physical_gpus"])
        out.append(Finding("env.tf-gpus", "ok", f"TensorFlow sees {tf_gpus} GPU(s): {listing}",
                           gpu_evidence))
    elif nvml_gpus:
        out.append(Finding(
            "env.tf-gpus", "fail",
            f"TensorFlow sees no GPU although NVML sees {nvml_gpus}",
            gpu_evidence,
            advice="Read the tf_log lines in the evidence: usually missing CUDA/cuDNN libraries "
                   "(install tensorflow[and-cuda]) or a driver older than the CUDA build needs.",
        ))
    else:
        out.append(Finding(
            "env.tf-gpus", "warn",
            "TensorFlow sees no GPU; gpudiag's probes will run on virtual CPU devices",
            gpu_evidence,
            advice="If this machine should have a GPU, check the driver (`nvidia-smi`) and the "
                   "tf_log lines in the evidence.",
        ))

    if nvml_gpus is not None:
        visible = visible_count(cvd, nvml_gpus)
        evidence = {"nvml_gpu_count": nvml_gpus, "visible_by_cuda_visible_devices": visible,
                    "CUDA_VISIBLE_DEVICES": cvd, "tf_gpu_count": tf_gpus}
        if visible < nvml_gpus:
            out.append(Finding(
                "env.cuda-visible-devices", "warn",
                f"CUDA_VISIBLE_DEVICES={cvd!r} hides {nvml_gpus - visible} of {nvml_gpus} GPU(s)",
                evidence,
                advice="Unset CUDA_VISIBLE_DEVICES or list every GPU index to use them all.",
            ))
        if cuda_build and tf_gpus and tf_gpus < visible:
            out.append(Finding(
                "env.gpu-count", "fail",
                f"TensorFlow sees {tf_gpus} GPU(s) but {visible} are visible to CUDA",
                evidence,
                advice="A GPU TensorFlow skips is usually one whose compute capability the build "
                       "does not support, or one in use exclusively by another process.",
            ))
    return out


# ---------------------------------------------------------------- nvml: was every GPU used?

# A run shorter than this cannot be judged from NVML's utilization (its window is up to 1 s).
MIN_JUDGED_S = 1.0


def gpu_numbers(s: DeviceSummary) -> dict[str, Any]:
    """One GPU's summary as plain numbers for evidence (None where not available)."""
    return {
        "index": s.index,
        "name": or_none(s.name),
        "pci_bus_id": or_none(s.pci_bus_id),
        "util_mean_percent": _round(s.util_mean_percent),
        "util_p50_percent": _round(s.util_p50_percent),
        "util_p95_percent": _round(s.util_p95_percent),
        "util_max_percent": _round(s.util_max_percent),
        "util_source": s.util_source,
        "util_samples": s.util_sample_count,
        "active_s": _round(s.active_s),
        "observed_s": round(s.observed_s, 2),
        "peak_memory_used_bytes": or_none(s.peak_memory_used_bytes),
        "memory_total_bytes": or_none(s.memory_total_bytes),
        "processes": [p.pid for p in s.processes],
        "error": s.error,
    }


def _round(value: float | NotAvailable, digits: int = 1) -> float | None:
    return None if value is NOT_AVAILABLE else round(float(value), digits)


def _util_text(s: DeviceSummary) -> str:
    if s.util_p95_percent is NOT_AVAILABLE or s.util_mean_percent is NOT_AVAILABLE:
        return f"GPU {s.index}: utilization not available"
    active = ("" if s.active_s is NOT_AVAILABLE
              else f", active {s.active_s:.1f} of {s.observed_s:.1f} s")
    return (f"GPU {s.index}: mean {s.util_mean_percent:.0f} %, p95 {s.util_p95_percent:.0f} %"
            f"{active}")


def _gib(n: int | NotAvailable) -> str:
    return "?" if n is NOT_AVAILABLE else f"{n / 2**30:.1f} GiB"


def every_gpu_used(
    summaries: Sequence[DeviceSummary],
    idle_threshold_percent: float,
    *,
    nvml_unavailable_reason: str | None = None,
    expected_indices: Sequence[int] | None = None,
    check_id: str = "nvml.every-gpu-used",
) -> Finding:
    """Did every expected GPU work? From the sampler's per-device summaries.

    A GPU counts as idle when its p95 utilization stayed under ``idle_threshold_percent``
    (it worked less than 5 % of the time at most); a GPU NVML lost is a fail; a GPU whose
    utilization NVML cannot give is neither. Skip when NVML was unavailable.
    """
    if nvml_unavailable_reason is not None:
        return Finding(
            check_id, "skip",
            f"could not check that every GPU was used: NVML is not available "
            f"({nvml_unavailable_reason})",
            {"reason": nvml_unavailable_reason},
            advice="Run where the NVIDIA driver is installed (libnvidia-ml.so.1); "
                   "`gpudiag env` says what NVML reports.",
        )
    judged = [s for s in summaries if expected_indices is None or s.index in expected_indices]
    evidence: dict[str, Any] = {
        "idle_threshold_percent": idle_threshold_percent,
        "expected_indices": None if expected_indices is None else list(expected_indices),
        "gpus": [gpu_numbers(s) for s in summaries],
    }
    if not judged:
        return Finding(check_id, "skip", "no GPU was sampled, so none can be judged", evidence)
    lost = [s for s in judged if s.error is not None]
    blind = [s for s in judged if s.error is None and s.util_p95_percent is NOT_AVAILABLE]
    idle = [s for s in judged if s.error is None and s.util_p95_percent is not NOT_AVAILABLE
            and s.util_p95_percent < idle_threshold_percent]
    worked = [s for s in judged if s.error is None and s.util_p95_percent is not NOT_AVAILABLE
              and s.util_p95_percent >= idle_threshold_percent]
    evidence.update(idle_indices=[s.index for s in idle], worked_indices=[s.index for s in worked],
                    lost_indices=[s.index for s in lost],
                    no_utilization_indices=[s.index for s in blind])
    lost_text = "; ".join(f"{s.label} failed: {s.error}" for s in lost)

    def idle_text(s: DeviceSummary) -> str:
        held = ""
        if s.processes:
            pids = ", ".join(str(p.pid) for p in s.processes)
            held = f"; memory held there ({_gib(s.peak_memory_used_bytes)}, pid {pids}) "
            held += "but no kernel ran"
        return (f"{s.label} stayed idle (p95 {s.util_p95_percent:.0f} %, max "
                f"{s.util_max_percent:.0f} % over {s.observed_s:.1f} s{held})")

    if lost:
        return Finding(
            check_id, "fail",
            lost_text + (f"; {len(worked)} other GPU(s) kept working" if worked else ""),
            evidence,
            advice="A lost GPU (NVMLError_GpuIsLost) needs a reset or a reboot; check "
                   "`nvidia-smi -q` and the kernel log (dmesg: Xid errors).",
        )
    if idle and worked:
        used = ", ".join(str(s.index) for s in worked)
        return Finding(
            check_id, "fail",
            f"only GPU(s) {used} of {len(judged)} worked: " + "; ".join(idle_text(s) for s in idle)
            + " - while " + "; ".join(_util_text(s) for s in worked),
            evidence,
            advice="The workload put no work on the idle GPU(s). With TensorFlow, distribute "
                   "it (tf.distribute.MirroredStrategy, or one tower per GPU under tf.device) "
                   "and check with `gpudiag placement`; if only some GPUs are meant to be "
                   "used, hide the others with CUDA_VISIBLE_DEVICES (or watch only those "
                   "with --gpus).",
        )
    longest = max(s.observed_s for s in judged)
    if idle and longest < MIN_JUDGED_S:
        return Finding(
            check_id, "warn",
            f"the run lasted {longest:.1f} s, too short to tell idle GPUs from busy ones "
            f"(NVML's utilization window is up to 1 s); no GPU reached "
            f"{idle_threshold_percent:g} %",
            evidence,
            advice="Watch a run of a few seconds at least.",
        )
    if idle:
        return Finding(
            check_id, "fail",
            f"no GPU was used: all {len(idle)} stayed under {idle_threshold_percent:g} % "
            f"utilization (" + "; ".join(_util_text(s) for s in idle) + ")",
            evidence,
            advice="The workload ran without touching the GPUs: check that the framework "
                   "sees them (`gpudiag env`) and where ops were placed (`gpudiag placement`).",
        )
    if blind and not worked:
        return Finding(
            check_id, "skip",
            "NVML gives no utilization for " + ", ".join(s.label for s in blind)
            + ", so whether they worked cannot be told",
            evidence,
        )
    message = (f"every GPU worked (at least {idle_threshold_percent:g} % utilization at p95): "
               + "; ".join(_util_text(s) for s in worked))
    if blind:
        return Finding(
            check_id, "warn",
            message + "; no utilization reading for " + ", ".join(s.label for s in blind),
            evidence,
            advice="NVML does not report utilization for those devices (e.g. MIG instances, "
                   "some virtual GPUs); check them another way.",
        )
    return Finding(check_id, "ok", message, evidence)


def nvml_sampling(
    backend: str | None, reason: str | None, interval_s: float,
    result: SamplingResult | None, *, check_id: str = "nvml.sampling",
) -> Finding:
    """Whether NVML sampling ran, what it cost, and what the devices could not report."""
    if result is None:
        return Finding(
            check_id, "skip", f"NVML sampling skipped: {reason}", {"reason": reason},
            advice="Without NVML there is no driver-side view of the GPUs; install the NVIDIA "
                   "driver where there is a GPU.",
        )
    cost = result.cost
    missing = {s.index: list(s.unavailable_fields) for s in result.summaries
               if s.unavailable_fields}
    evidence = {"backend": backend, "interval_s": interval_s, "cost": cost.to_dict(),
                "unavailable_fields": missing, "sampler_error": result.sampler_error}
    text = (f"sampled {len(result.summaries)} GPU(s) every {interval_s:g} s for "
            f"{result.duration_s:.1f} s ({cost.polls} polls, "
            f"{len(result.util_samples)} driver utilization samples); the sampler used "
            f"{cost.cpu_fraction:.2%} of one CPU core, {cost.poll_wall_mean_s * 1000:.2f} ms "
            f"per poll")
    if result.sampler_error is not None:
        return Finding(check_id, "fail", f"the NVML sampler stopped early: "
                       f"{result.sampler_error}", evidence,
                       advice="Report this as a gpudiag bug with the evidence.")
    if cost.cpu_fraction > 0.05:
        return Finding(check_id, "warn", text + ": more than 5 %", evidence,
                       advice="Use a longer --interval.")
    if missing:
        text += "; not available: " + "; ".join(
            f"GPU {i}: {', '.join(f)}" for i, f in missing.items())
    return Finding(check_id, "ok", text, evidence)
