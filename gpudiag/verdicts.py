"""Verdicts: pure functions from plain evidence to findings.

No TensorFlow, no NVML, no I/O here: each function takes plain data (dicts, lists,
numbers, parsed rows) and returns Finding records, so every rule is tested with plain
data. Finding ids are stable; docs/findings.md explains each and what to do about it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpudiag.nvml import NOT_AVAILABLE, DeviceSummary, NotAvailable, SamplingResult, or_none
from gpudiag.nvml.mapping import parse_cuda_visible_devices
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
    """How many of ``physical`` GPUs CUDA_VISIBLE_DEVICES leaves visible, by CUDA's rules
    (gpudiag.nvml.mapping.parse_cuda_visible_devices: unset = all, ``-1`` = none)."""
    visible = parse_cuda_visible_devices(cuda_visible_devices, device_count=physical)
    return physical if visible is None else min(len(visible), physical)


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


# ---------------------------------------------------------------- memory

# CUDA context, cuBLAS/cuDNN handles and TF's own bookkeeping sit on top of the tensors:
# NVML's used memory may exceed TensorFlow's peak by this much and still "track" it.
MEMORY_OVERHEAD_ALLOWANCE_BYTES = 2**30
MEMORY_GPU_MODES = {"default": "memory.default", "growth": "memory.growth",
                    "growth_env": "memory.growth-env", "limit": "memory.limit"}
_MODIFY_FIX = ("configure devices first thing after importing TensorFlow, before any op, "
               "tf.function, Keras model or tf.config.list_logical_devices() call touches "
               "them; or set TF_FORCE_GPU_ALLOW_GROWTH=true in the environment, which needs "
               "no code")


def _mib(n: int | None) -> str:
    return "?" if n is None else f"{n / 2**20:.0f} MiB"


def memory_series(result: dict[str, Any]) -> dict[str, Any]:
    """Plain numbers of one mode: TF's peak, and what NVML says the process held.

    NVML's "process used" is the process's own entry when NVML lists it (pids match
    outside containers), else the device's used memory minus the baseline taken before
    TensorFlow started in that process.
    """
    readings = result.get("pattern", {}).get("readings", [])
    grow = [r for r in readings if r["phase"] in ("initialised", "grow")]
    baseline = (result.get("nvml") or {}).get("baseline_device_used_bytes")

    def held(r: dict[str, Any]) -> int | None:
        if r.get("nvml_process_used_bytes") is not None:
            return int(r["nvml_process_used_bytes"])
        if r.get("nvml_device_used_bytes") is not None and baseline is not None:
            return max(0, int(r["nvml_device_used_bytes"]) - int(baseline))
        return None

    nvml_held = [held(r) for r in grow]
    known = [h for h in nvml_held if h is not None]
    source = ("process" if any(r.get("nvml_process_used_bytes") is not None for r in grow)
              else "device minus baseline" if known else None)
    return {
        "tf_peak_bytes": max((r["tf_peak_bytes"] for r in readings), default=0),
        "tf_peak_by_step": [r["tf_peak_bytes"] for r in grow],
        "nvml_held_by_step": nvml_held,
        "nvml_held_max_bytes": max(known) if known else None,
        "nvml_source": source,
        "nvml_total_bytes": (result.get("nvml") or {}).get("total_bytes"),
        "released_current_bytes": readings[-1]["tf_current_bytes"] if readings else None,
    }


MEMORY_MODE_NAMES = {"default": "the default mode",
                     "growth": "memory growth (set_memory_growth)",
                     "growth_env": "TF_FORCE_GPU_ALLOW_GROWTH=true",
                     "limit": "the memory limit (memory_limit)"}


def memory_no_gpu(mode: str, reason: str) -> Finding:
    """A GPU memory mode that cannot run without a GPU: a skip with the reason."""
    return Finding(MEMORY_GPU_MODES[mode], "skip",
                   f"{MEMORY_MODE_NAMES[mode]} needs a GPU: {reason}", {"reason": reason},
                   advice="Run `gpudiag memory` on a machine where TensorFlow sees a GPU "
                          "(`gpudiag env` says why it does not here).")


def memory_cpu(result: dict[str, Any]) -> Finding:
    """Without a GPU: TensorFlow's CPU allocator's view of the same pattern."""
    series = memory_series(result)
    pattern = result["pattern"]
    evidence = {"device": pattern["device"], **series, "readings": pattern["readings"]}
    expected = pattern["steps"] * pattern["step_mb"] * 2**20
    peak = series["tf_peak_bytes"]
    text = (f"no GPU: on {pattern['device']} TensorFlow's memory info rose to a peak of "
            f"{_mib(peak)} over {pattern['steps']} steps of {pattern['step_mb']} MiB and fell to "
            f"{_mib(series['released_current_bytes'])} after release")
    if peak < expected:
        return Finding("memory.cpu", "warn", text + f" (expected {_mib(expected)})", evidence,
                       advice="TensorFlow's CPU allocator reported less than was allocated; "
                              "compare the readings in the evidence.")
    return Finding("memory.cpu", "ok", text, evidence)


def memory_default(result: dict[str, Any]) -> Finding:
    """Default mode: how much of the card the process took compared with TF's peak."""
    s = memory_series(result)
    evidence = {**s, "memory_growth": result.get("memory_growth")}
    if s["nvml_held_max_bytes"] is None:
        return Finding("memory.default", "skip",
                       f"default mode ran (TensorFlow's peak {_mib(s['tf_peak_bytes'])}) but NVML "
                       f"could not say what the process held: {result['nvml'].get('reason')}",
                       evidence)
    total = s["nvml_total_bytes"]
    share = f" ({s['nvml_held_max_bytes'] / total:.0%} of the card)" if total else ""
    return Finding("memory.default", "ok",
                   f"by default the process held {_mib(s['nvml_held_max_bytes'])}{share} while "
                   f"TensorFlow's own peak was {_mib(s['tf_peak_bytes'])}: TensorFlow reserves "
                   "most of the GPU up front unless told otherwise", evidence)


def memory_growth(result: dict[str, Any], *, check_id: str = "memory.growth",
                  default: dict[str, Any] | None = None,
                  allowance_bytes: int = MEMORY_OVERHEAD_ALLOWANCE_BYTES) -> Finding:
    """Growth works when NVML's view of the process tracks TF's peak, not the whole card:
    it grew with the pattern and stayed within twice TF's peak plus ``allowance_bytes``."""
    s = memory_series(result)
    how = ("TF_FORCE_GPU_ALLOW_GROWTH=true" if check_id.endswith("-env")
           else "set_memory_growth(gpu, True)")
    evidence = {**s, "memory_growth": result.get("memory_growth"), "how": how,
                "allowance_bytes": allowance_bytes, "env": result.get("env")}
    if default is not None:
        evidence["default_nvml_held_max_bytes"] = memory_series(default)["nvml_held_max_bytes"]
    if s["nvml_held_max_bytes"] is None:
        return Finding(check_id, "skip",
                       f"memory growth via {how}: TensorFlow's peak rose to "
                       f"{_mib(s['tf_peak_bytes'])}, but without NVML "
                       f"({result['nvml'].get('reason')}) what the process really held is unknown",
                       evidence)
    held = [h for h in s["nvml_held_by_step"] if h is not None]
    peaks = s["tf_peak_by_step"]
    grew_tf = peaks[-1] - peaks[0] if peaks else 0
    grew_nvml = held[-1] - held[0] if len(held) > 1 else 0
    # With growth the allocator extends itself in regions of doubling size, so the process
    # may hold up to about twice TensorFlow's peak, plus the CUDA context.
    tracks = (s["nvml_held_max_bytes"] <= 2 * s["tf_peak_bytes"] + allowance_bytes
              and grew_nvml >= grew_tf // 2)
    compare = ""
    if evidence.get("default_nvml_held_max_bytes"):
        compare = f" (default mode: {_mib(evidence['default_nvml_held_max_bytes'])})"
    if tracks:
        return Finding(check_id, "ok",
                       f"memory growth via {how} works: the process held "
                       f"{_mib(s['nvml_held_max_bytes'])} (NVML) at TensorFlow's peak of "
                       f"{_mib(s['tf_peak_bytes'])}, growing with it{compare}", evidence)
    return Finding(check_id, "fail",
                   f"memory growth via {how} did not take effect: the process held "
                   f"{_mib(s['nvml_held_max_bytes'])} (NVML) while TensorFlow's peak was "
                   f"{_mib(s['tf_peak_bytes'])}{compare}",
                   evidence,
                   advice="Enable growth on every GPU before any op runs, or set "
                          "TF_FORCE_GPU_ALLOW_GROWTH=true before TensorFlow starts; make sure "
                          "TF_FORCE_GPU_ALLOW_GROWTH is not set to false.")


def memory_limit(result: dict[str, Any], limit_mb: int,
                 allowance_bytes: int = MEMORY_OVERHEAD_ALLOWANCE_BYTES) -> Finding:
    """The limit holds when a larger allocation fails inside the child and the child lives."""
    s = memory_series(result)
    past = result.get("past_limit") or {}
    alive = bool(result.get("alive_after"))
    pattern_error = (result.get("pattern") or {}).get("allocation_error")
    evidence = {**s, "memory_limit_mb": limit_mb, "past_limit": past, "alive_after": alive,
                "pattern_allocation_error": pattern_error, "allowance_bytes": allowance_bytes}
    limit = limit_mb * 2**20
    fix = ("Set the limit with tf.config.set_logical_device_configuration(gpu, "
           "[tf.config.LogicalDeviceConfiguration(memory_limit=MB)]) before any op runs.")
    if not past.get("raised"):
        return Finding("memory.limit", "fail",
                       f"the {limit_mb} MiB limit did not hold: allocating {past.get('size_mb')} "
                       "MiB succeeded", evidence, advice=fix)
    if past.get("error_type") != "ResourceExhaustedError":
        return Finding("memory.limit", "warn",
                       f"allocating {past.get('size_mb')} MiB past the {limit_mb} MiB limit "
                       f"raised {past.get('error_type')}, not ResourceExhaustedError: "
                       f"{past.get('error')}", evidence, advice=fix)
    if not alive:
        return Finding("memory.limit", "fail",
                       "after the out-of-memory error the process could no longer run an op",
                       evidence, advice=fix)
    if s["tf_peak_bytes"] > limit:
        return Finding("memory.limit", "fail",
                       f"TensorFlow's peak {_mib(s['tf_peak_bytes'])} exceeded the "
                       f"{limit_mb} MiB limit", evidence, advice=fix)
    held = s["nvml_held_max_bytes"]
    if held is not None and held > limit + allowance_bytes:
        return Finding("memory.limit", "fail",
                       f"the process held {_mib(held)} (NVML), more than the {limit_mb} MiB "
                       "limit plus the CUDA context", evidence, advice=fix)
    nvml_text = (f"; the process held {_mib(held)} (NVML)" if held is not None
                 else f"; NVML's view unavailable ({result['nvml'].get('reason')})")
    return Finding("memory.limit", "ok",
                   f"the {limit_mb} MiB limit held: allocating {past['size_mb']} MiB raised "
                   f"ResourceExhaustedError inside the child, which kept working{nvml_text}",
                   evidence)


def memory_modify_after_init(result: dict[str, Any]) -> Finding:
    """The classic mistake, observed: TensorFlow refuses configuration changes after init."""
    attempts = result.get("attempts") or []
    evidence = {"attempts": attempts, "gpu_available": result.get("gpu_available")}
    raised = [a for a in attempts if a["raised"]]
    silent = [a for a in attempts if not a["raised"]]
    if not attempts:
        return Finding("memory.modify-after-init", "fail", "the probe made no attempt", evidence)
    if silent:
        return Finding("memory.modify-after-init", "fail",
                       f"TensorFlow accepted {silent[0]['api']} after its devices were "
                       "initialised, without an error", evidence,
                       advice="Unexpected for TensorFlow 2: check the TensorFlow version.")
    quotes = "; ".join(f"{a['api']} raised {a['error_type']}: \"{a['error']}\"" for a in raised)
    where = ("" if result.get("gpu_available") else
             " (no GPU here, so shown on the CPU; with a GPU, set_memory_growth raises "
             "\"Physical devices cannot be modified after being initialized\")")
    return Finding("memory.modify-after-init", "ok",
                   f"changing the device configuration after TensorFlow initialised its "
                   f"devices fails: {quotes}{where}. To fix: {_MODIFY_FIX}", evidence)


# ---------------------------------------------------------------- scaling

# Efficiency = throughput(n) / (n x throughput(1)) that well-tuned data-parallel CNN
# training reaches within one node; below it is a warn.
SCALING_OK_EFFICIENCY = {2: 0.95, 4: 0.93, 8: 0.90}
SHARED_DEVICE_KINDS = ("virtual-cpu", "virtual-gpu")
INPUT_WAIT_CAUSE_FRACTION = 0.10  # of the traced window spent handing over batches
AVERAGING_CAUSE_FRACTION = 0.20  # of a step that the all-reduce lower bound alone takes
LEARN_LOSS_FRACTION = 0.8  # final loss must be below this x ln(classes)
LEARN_ACCURACY_GAIN = 0.10  # final accuracy >= chance + this x (1 - chance)
TOWERS_SLOWER_RATIO = 0.90  # towers below this x mirrored throughput is a warn


def efficiency_threshold(n_devices: int) -> float:
    """The ok threshold for ``n_devices`` (0.95 up to 2, 0.93 up to 4, 0.90 beyond)."""
    for n, threshold in sorted(SCALING_OK_EFFICIENCY.items()):
        if n_devices <= n:
            return threshold
    return SCALING_OK_EFFICIENCY[max(SCALING_OK_EFFICIENCY)]


def allreduce_lower_bound_s(gradient_bytes: int, n_devices: int, busbw_bytes_per_s: float) -> float:
    """Least time an all-reduce of ``gradient_bytes`` over ``n_devices`` can take:
    a ring moves bytes x 2(n-1)/n over each link, at best at the bus bandwidth."""
    if n_devices < 2 or busbw_bytes_per_s <= 0:
        return 0.0
    return gradient_bytes * 2 * (n_devices - 1) / n_devices / busbw_bytes_per_s


def scaling_rows(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Speedup and efficiency per configuration.

    ``points``: dicts with ``strategy``, ``n_devices``, ``examples_per_s`` and
    ``step_s`` (median seconds per step); the same strategy's 1-device point is the base.
    """
    base = {p["strategy"]: p for p in points if p["n_devices"] == 1}
    rows = []
    for p in sorted(points, key=lambda q: (q["strategy"], q["n_devices"])):
        b = base.get(p["strategy"])
        eps, b_eps = p.get("examples_per_s"), b.get("examples_per_s") if b else None
        speedup = eps / b_eps if eps and b_eps else None
        rows.append({**p, "speedup": speedup,
                     "efficiency": speedup / p["n_devices"] if speedup else None})
    return rows


def _fmt_rate(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def scaling_efficiency(
    strategy: str,
    rows: Sequence[dict[str, Any]],
    kind: str,
    *,
    gradient_bytes: int,
    busbw_bytes_per_s: float | None,
    batch_per_device: int,
    variables_on: str,
) -> Finding:
    """Did adding devices make ``strategy`` faster, and what explains the time lost?

    ``rows``: this strategy's scaling_rows, each optionally with ``input_wait_fraction``
    (from its trace). ``busbw_bytes_per_s``: the best bus bandwidth the collective probe
    measured (None when it did not run).
    """
    check_id = f"scaling.efficiency.{strategy}"
    mine = sorted((r for r in rows if r["strategy"] == strategy), key=lambda r: r["n_devices"])
    base = next((r for r in mine if r["n_devices"] == 1), None)
    multi = [r for r in mine if r["n_devices"] > 1]
    if base is None or not base.get("examples_per_s") or not base.get("step_s"):
        return Finding(check_id, "skip",
                       f"{strategy}: no 1-device throughput to compare with", {"rows": mine})
    if not multi:
        return Finding(check_id, "skip",
                       f"{strategy}: only one device count ran, nothing to compare",
                       {"rows": mine})
    per_n: list[dict[str, Any]] = []
    below: list[str] = []
    causes: list[str] = []
    fixes: list[str] = []
    for r in multi:
        n, eff = r["n_devices"], r.get("efficiency")
        threshold = efficiency_threshold(n)
        comm_s = allreduce_lower_bound_s(gradient_bytes, n, busbw_bytes_per_s or 0.0)
        step_s = r.get("step_s") or 0.0
        lost_s = max(0.0, step_s - base["step_s"])
        explained = min(1.0, comm_s / lost_s) if lost_s > 0 and busbw_bytes_per_s else None
        entry = {"n_devices": n, "examples_per_s": r.get("examples_per_s"),
                 "speedup": r.get("speedup"), "efficiency": eff, "ok_threshold": threshold,
                 "step_s": step_s, "lost_s_per_step": lost_s,
                 "allreduce_lower_bound_s": comm_s if busbw_bytes_per_s else None,
                 "communication_explains_fraction": explained,
                 "input_wait_fraction": r.get("input_wait_fraction")}
        per_n.append(entry)
        if eff is None or eff >= threshold:
            continue
        below.append(f"{n} devices {eff:.2f} (ok from {threshold:.2f})" if eff is not None
                     else f"{n} devices: no throughput")
        if explained is not None:
            causes.append(f"at {n} devices the all-reduce of {gradient_bytes / 2**20:.2f} MiB "
                          f"of gradients needs at least {comm_s * 1e3:.2f} ms per step, "
                          f"{explained:.0%} of the {lost_s * 1e3:.2f} ms lost per step")
        wait = r.get("input_wait_fraction")
        if wait is not None and wait > INPUT_WAIT_CAUSE_FRACTION:
            causes.append(f"at {n} devices {wait:.0%} of the traced steps waited for input")
            fixes.append("prefetch (dataset.prefetch(tf.data.AUTOTUNE)), parallel map "
                         "calls, cache decoded data")
        if step_s > 0 and comm_s / step_s > AVERAGING_CAUSE_FRACTION:
            causes.append(f"at {n} devices gradient averaging alone takes at least "
                          f"{comm_s / step_s:.0%} of a step: a per-device batch of "
                          f"{batch_per_device} is too small for the gradient size")
            fixes.append("a bigger per-device batch (--batch-per-device)")
    if strategy == "towers" and variables_on == "cpu" and kind not in SHARED_DEVICE_KINDS \
            and below:
        causes.append("the variables live on the CPU: every tower reads them across PCIe "
                      "and every update is computed there")
        fixes.append("variables on the first device (--variables-on device)")
    listing = ", ".join(
        f"{e['n_devices']} devices {_fmt_rate(e['examples_per_s'])} ex/s "
        f"(x{e['speedup']:.2f}, efficiency {e['efficiency']:.2f})"
        if e["efficiency"] is not None else f"{e['n_devices']} devices: n/a"
        for e in per_n)
    evidence = {"device_kind": kind, "base_examples_per_s": base["examples_per_s"],
                "base_step_s": base["step_s"], "per_device_count": per_n,
                "gradient_bytes": gradient_bytes, "busbw_bytes_per_s": busbw_bytes_per_s,
                "batch_per_device": batch_per_device, "variables_on": variables_on,
                "causes": causes}
    head = f"{strategy}: 1 device {_fmt_rate(base['examples_per_s'])} ex/s; {listing}"
    if kind in SHARED_DEVICE_KINDS:
        what = "virtual CPU devices" if kind == "virtual-cpu" else "logical GPUs split from one"
        return Finding(
            check_id, "warn",
            f"{head}. Not meaningful: these are {what} sharing the same cores, so more "
            "devices cannot add compute",
            evidence,
            advice="Run on a machine with several physical GPUs to measure scaling; here the "
                   "run checks only that multi-device training works and every device did work.",
        )
    if not below:
        return Finding(check_id, "ok", f"{head}: every device count scales at or above its "
                       "threshold", evidence)
    why = ("; ".join(causes) + ".") if causes else (
        "None of the causes gpudiag measures (input waits, averaging cost, variable "
        "placement) explains it.")
    advice = ("Try " + "; ".join(dict.fromkeys(fixes)) + ".") if fixes else (
        "Open the profile of the slowest configuration in TensorBoard (Profile tab, "
        "trace viewer) and compare the devices' busy time.")
    return Finding(check_id, "warn",
                   f"{head}: below threshold at {', '.join(below)}. {why}", evidence,
                   advice=advice)


def device_work(
    config: str,
    devices: Sequence[str],
    ops_by_device: dict[str, int] | None,
    trace_busy_s: dict[str, float] | None,
    *,
    trace_window_s: float | None = None,
    trace_reason: str | None = None,
    placement_reason: str | None = None,
) -> Finding:
    """Every compute device of one configuration did work: by placement and by trace.

    ``ops_by_device``: ops of the traced step per device (None: not inspected).
    ``trace_busy_s``: busy seconds per device in the profiled window (None: no trace,
    ``trace_reason`` says why).
    """
    check_id = f"scaling.devices-worked.{config}"
    evidence: dict[str, Any] = {"devices": list(devices), "ops_by_device": ops_by_device,
                                "trace_busy_s": trace_busy_s, "trace_window_s": trace_window_s,
                                "trace_reason": trace_reason,
                                "placement_reason": placement_reason}
    no_ops = [d for d in devices if ops_by_device and not ops_by_device.get(d)]
    no_busy = [d for d in devices if trace_busy_s is not None and not trace_busy_s.get(d)]
    sources = []
    if ops_by_device:
        sources.append("placement: " + ", ".join(f"{d} {ops_by_device.get(d, 0)} ops"
                                                 for d in devices))
    if trace_busy_s is not None:
        window = f" of a {trace_window_s * 1e3:.1f} ms window" if trace_window_s else ""
        sources.append("trace: " + ", ".join(f"{d} busy {trace_busy_s.get(d, 0.0) * 1e3:.1f} ms"
                                             for d in devices) + window)
    if no_ops or no_busy:
        idle = list(dict.fromkeys(no_ops + no_busy))
        parts = []
        if no_ops:
            parts.append(f"no ops placed on {', '.join(no_ops)}")
        if no_busy:
            parts.append(f"no work in the trace on {', '.join(no_busy)}")
        return Finding(check_id, "fail",
                       f"{config}: {', '.join(idle)} did no work ({'; '.join(parts)})",
                       evidence,
                       advice="Each tower's ops must be under tf.device(<its device>) and the "
                              "batch split across all towers; with MirroredStrategy pass every "
                              "device to the strategy.")
    if not sources:
        return Finding(check_id, "skip",
                       f"{config}: neither placement nor a trace could be inspected"
                       + (f" ({trace_reason})" if trace_reason else ""), evidence)
    tail = f" (no trace: {trace_reason})" if trace_busy_s is None and trace_reason else ""
    if not ops_by_device and placement_reason:
        tail += f" (placement not inspected: {placement_reason})"
    return Finding(check_id, "ok",
                   f"{config}: every device did work; " + "; ".join(sources) + tail, evidence)


def learning(configs: Sequence[dict[str, Any]]) -> Finding:
    """The loss fell clearly below ln(classes) and accuracy rose above chance, per run.

    ``configs``: dicts with ``name``, ``num_classes``, ``steps``, ``initial_loss``,
    ``final_loss``, ``final_accuracy`` (training, mean of the last steps) and optionally
    ``eval_accuracy``, ``eval_accuracy_ema``, ``learning_rate``. A NaN loss is None.
    """
    import math

    if not configs:
        return Finding("scaling.learning", "skip", "no training run completed", {})
    failed, rows = [], []
    for c in configs:
        classes = int(c["num_classes"])
        ln_c = math.log(classes)
        chance = 1.0 / classes
        max_loss = LEARN_LOSS_FRACTION * ln_c
        min_acc = chance + LEARN_ACCURACY_GAIN * (1 - chance)
        loss, acc = c.get("final_loss"), c.get("final_accuracy")
        ok = loss is not None and acc is not None and loss <= max_loss and acc >= min_acc
        row = {**c, "ln_classes": ln_c, "chance_accuracy": chance, "max_final_loss": max_loss,
               "min_final_accuracy": min_acc, "learned": ok}
        rows.append(row)
        if not ok:
            loss_text = "NaN (diverged)" if loss is None else f"{loss:.4f}"
            acc_text = "n/a" if acc is None else f"{acc:.2f}"
            failed.append(f"{c['name']}: loss {loss_text} (ln {classes} = {ln_c:.4f}, must "
                          f"fall below {max_loss:.2f}), accuracy {acc_text} (chance "
                          f"{chance:.2f}, must reach {min_acc:.2f}) after {c['steps']} steps")
    evidence = {"runs": rows}
    if failed:
        return Finding(
            "scaling.learning", "fail",
            "did not learn: " + "; ".join(failed), evidence,
            advice="A loss stuck at ln(classes) with chance accuracy means the updates do "
                   "not reach the weights: a zero or tiny learning rate, gradients that are "
                   "None or zero (variables created outside the tape, a stop_gradient), or "
                   "an optimizer applied to a copy of the weights. A NaN loss means too "
                   "high a learning rate.",
        )
    best = ", ".join(f"{r['name']} {r['final_loss']:.3f}/{r['final_accuracy']:.2f}"
                     for r in rows)
    return Finding("scaling.learning", "ok",
                   f"every run learned (final loss/accuracy; ln {int(configs[0]['num_classes'])}"
                   f" = {math.log(int(configs[0]['num_classes'])):.4f}): {best}", evidence)


def towers_vs_mirrored(rows: Sequence[dict[str, Any]]) -> Finding:
    """Throughput of the hand-written towers beside MirroredStrategy at each device count."""
    by = {(r["strategy"], r["n_devices"]): r.get("examples_per_s") for r in rows}
    counts = sorted({n for s, n in by if s in ("towers", "mirrored")})
    pairs = []
    for n in counts:
        t, m = by.get(("towers", n)), by.get(("mirrored", n))
        if t and m:
            pairs.append({"n_devices": n, "towers_examples_per_s": t,
                          "mirrored_examples_per_s": m, "towers_over_mirrored": t / m})
    if not pairs:
        return Finding("scaling.towers-vs-mirrored", "skip",
                       "towers and mirrored did not both run at any device count",
                       {"rows": list(rows)})
    text = "; ".join(f"{p['n_devices']} device(s): towers {p['towers_examples_per_s']:,.0f} vs "
                     f"mirrored {p['mirrored_examples_per_s']:,.0f} ex/s "
                     f"(x{p['towers_over_mirrored']:.2f})" for p in pairs)
    slower = [p for p in pairs if p["n_devices"] > 1
              and p["towers_over_mirrored"] < TOWERS_SLOWER_RATIO]
    evidence = {"pairs": pairs, "warn_below_ratio": TOWERS_SLOWER_RATIO}
    if slower:
        return Finding("scaling.towers-vs-mirrored", "warn",
                       f"the tower code is slower than MirroredStrategy: {text}", evidence,
                       advice="MirroredStrategy all-reduces with NCCL on GPUs and overlaps it; "
                              "prefer it, or put the tower variables on a device "
                              "(--variables-on device) and average with fewer ops.")
    return Finding("scaling.towers-vs-mirrored", "ok", f"side by side: {text}", evidence)


def allreduce_bandwidth(result: dict[str, Any], kind: str) -> Finding:
    """The collective probe's table: time, algorithm and bus bandwidth per message size."""
    rows = result.get("rows") or []
    n = result.get("n_devices")
    if not rows:
        return Finding("scaling.allreduce", "skip",
                       f"no all-reduce measured ({n} device(s): nothing to reduce across)",
                       dict(result))
    best = max(rows, key=lambda r: r["busbw_bytes_per_s"])
    largest = max(rows, key=lambda r: r["size_bytes"])
    ops = result.get("cross_device_ops")
    text = (f"all-reduce over {n} devices with {ops}: peak bus bandwidth "
            f"{best['busbw_bytes_per_s'] / 1e9:.2f} GB/s at {best['size_bytes'] / 2**20:g} MiB; "
            f"{largest['size_bytes'] / 2**20:g} MiB in {largest['time_s'] * 1e3:.1f} ms "
            f"(busbw {largest['busbw_bytes_per_s'] / 1e9:.2f} GB/s)")
    evidence = {"n_devices": n, "cross_device_ops": ops, "device_kind": kind, "rows": rows,
                "peak_busbw_bytes_per_s": best["busbw_bytes_per_s"]}
    if kind == "virtual-cpu":
        text += ("; these are virtual CPU devices in one process, so the numbers are "
                 "host-memory numbers, not an interconnect's")
    elif kind == "virtual-gpu":
        text += "; logical GPUs split from one GPU: this is that GPU's memory, not a link"
    return Finding("scaling.allreduce", "ok", text, evidence)
