"""Verdicts of `gpudiag placement`: where TensorFlow put ops, pinned and unpinned.

Evidence: the placement log parsed into PlacementRow records (gpudiag.readers.placementlog), per
section of the probe, and the probe's result (gpudiag/probes/placement.py: the devices
each pinned op reported, what soft placement did, the multi-tower sum).
"""

from __future__ import annotations

from dataclasses import asdict

from gpudiag.devnames import device_type
from gpudiag.layout.units import share as pct
from gpudiag.readers.placementlog import PlacementRow, is_work, op_counts_by_device
from gpudiag.records.results import (
    InvalidPinResult,
    MultitowerResult,
    NoKernelPin,
    PinnedResult,
    Record,
    SoftPinResult,
)
from gpudiag.report import Finding
from gpudiag.verdicts.common import title


def placement_log(rows: list[PlacementRow], kind: str) -> Finding:
    """The placement log was captured and parsed; per-device op counts as evidence."""
    counts = op_counts_by_device(rows)
    if not counts:
        return Finding(
            "placement.log", "fail",
            "TensorFlow's device-placement log was empty: no op placements could be read",
            {"rows": len(rows)},
            title="the device-placement log was empty: no placement read",
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
        title=f"placement log read: {eager} eager ops, {graph} tf.function nodes",
    )


def default_device(rows: list[PlacementRow], kind: str, host: str) -> Finding:
    """Where unpinned work went: on a GPU machine it must be a GPU, not the CPU."""
    counts = op_counts_by_device(rows)
    gpu_ops = sum(n for d, n in counts.items() if device_type(d) == "GPU")
    cpu_ops = sum(n for d, n in counts.items() if device_type(d) == "CPU")
    evidence = {"op_counts_by_device": counts, "device_kind": kind}
    if kind == "virtual-cpu":
        return Finding(
            "placement.default-device", "warn",
            f"no GPU visible to TensorFlow: all {cpu_ops} unpinned ops ran on the CPU ({host})",
            evidence,
            title=title(f"no GPU: all {cpu_ops} unpinned ops ran on the CPU ({host})",
                        f"no GPU: all {cpu_ops} unpinned ops ran on the CPU"),
            advice="Run `gpudiag env`: it says whether a GPU exists (NVML), whether this "
                   "TensorFlow build has CUDA, and whether CUDA_VISIBLE_DEVICES hides devices.",
        )
    if gpu_ops == 0:
        return Finding(
            "placement.default-device", "fail",
            f"TensorFlow sees a GPU but placed all {cpu_ops} unpinned ops on the CPU",
            evidence,
            title=f"a GPU is seen, yet all {cpu_ops} unpinned ops ran on the CPU",
            advice="Look for tf.device('/cpu:0') scopes around the model and for ops without "
                   "GPU kernels; run `gpudiag env` for the CUDA build and driver.",
        )
    share = gpu_ops / max(1, gpu_ops + cpu_ops)
    return Finding(
        "placement.default-device", "ok",
        f"unpinned work went to the GPU: {gpu_ops} of {gpu_ops + cpu_ops} ops ({pct(share)})",
        evidence,
        title=f"unpinned work ran on the GPU: {gpu_ops} of {gpu_ops + cpu_ops} ops ({pct(share)})",
    )


def pinned(result: PinnedResult, rows: list[PlacementRow]) -> Finding:
    """Ops pinned with tf.device land where pinned, eagerly and in a tf.function graph."""
    mismatches = [
        f"eager matmul pinned to {p.requested} ran on {p.actual}"
        for p in result.eager if p.actual != p.requested
    ]
    graph = {r.op: r.device for r in rows if r.kind == "graph"}
    for node, target in result.graph_nodes.items():
        seen = graph.get(node)
        if seen is None:
            mismatches.append(f"graph node {node} (pinned to {target}) missing from the log")
        elif seen != target:
            mismatches.append(f"graph node {node} pinned to {target} placed on {seen}")
    evidence = {"targets": result.targets, "eager": [asdict(p) for p in result.eager],
                "graph_nodes_seen": {n: graph.get(n) for n in result.graph_nodes}}
    if mismatches:
        return Finding("placement.pinned", "fail",
                       f"{len(mismatches)} pinned op(s) did not land where pinned: "
                       + "; ".join(mismatches), evidence,
                       title=f"{len(mismatches)} pinned op(s) did not run where pinned",
                       advice="Soft placement moves ops whose device has no kernel for them; "
                              "check the device names (`gpudiag env` lists the logical devices).")
    return Finding("placement.pinned", "ok",
                   f"ops pinned to {', '.join(result.targets)} ran there, eagerly and "
                   "inside a tf.function", evidence,
                   title=title(f"pinned ops ran where pinned ({', '.join(result.targets)})",
                               "pinned ops ran where pinned"))


def _pinned(check_id: str, ok: bool, result: Record, ok_words: tuple[str, str, str],
            fail_words: tuple[str, str, str], advice: str = "") -> Finding:
    """A pin's verdict, the probe's ``result`` its evidence: ok or fail, each with its
    message and its title (the fullest first, then one that fits); ``advice`` on a fail."""
    message, *titles = ok_words if ok else fail_words
    return Finding(check_id, "ok" if ok else "fail", message, asdict(result),
                   title=title(*titles), advice="" if ok else advice)


def invalid_device(result: InvalidPinResult) -> Finding:
    """Soft placement off: pinning to a device that does not exist must raise."""
    requested, error, actual = result.requested, result.error_type, result.actual
    return _pinned(
        "placement.invalid-device", result.raised, result,
        (f"with soft placement off, pinning to {requested} (which does not exist) raised "
         f"{error}: {result.message}", f"a pin to missing {requested} raised {error}",
         "a pin to a missing device raised, as it should"),
        (f"with soft placement off, pinning to non-existent {requested} did not raise; the op "
         f"ran on {actual}", f"a pin to missing {requested} did not raise: it ran on {actual}",
         "a pin to a missing device did not raise"),
        advice="tf.config.set_soft_device_placement(False) did not take effect; something "
               "re-enables soft placement.")


def soft_fallback(result: SoftPinResult) -> Finding:
    """Soft placement on: the same pin falls back to an existing device."""
    actual, requested = result.actual, result.requested
    return _pinned(
        "placement.soft-fallback", bool(actual and actual != requested), result,
        (f"with soft placement on, the op pinned to non-existent {requested} fell back to "
         f"{actual}", f"soft placement: a pin to missing {requested} ran on {actual}",
         "soft placement: a pin to a missing device fell back"),
        (f"with soft placement on, the op pinned to {requested} reported device {actual!r}",
         f"soft placement: a pin to {requested} reported {actual!r}",
         "soft placement: a pin did not fall back"))


def no_gpu_kernel(result: NoKernelPin | None) -> Finding:
    """An op without a GPU kernel pinned to a GPU falls back to the CPU (GPU machines only)."""
    if result is None:
        return Finding("placement.no-gpu-kernel", "skip",
                       "no GPU visible to TensorFlow, so an op without a GPU kernel cannot be "
                       "pinned to one", {}, title="no GPU: an op without a GPU kernel not tried")
    op, actual = result.op, result.actual
    return _pinned(
        "placement.no-gpu-kernel", device_type(actual) == "CPU", result,
        (f"{op} (no GPU kernel) pinned to {result.requested} fell back to {actual}",
         f"{op} (no GPU kernel) fell back to {actual}",
         "an op without a GPU kernel fell back to the CPU"),
        (f"{op} pinned to {result.requested} reported {actual}, not the CPU",
         f"{op} (no GPU kernel) reported {actual}",
         "an op without a GPU kernel did not run on the CPU"))


def multitower(result: MultitowerResult, rows: list[PlacementRow]) -> Finding:
    """The same matmul on every device, add_n on the host: value right, parts placed right."""
    towers, host = result.towers, result.host
    matmuls = {r.op: r.device for r in rows if r.kind == "graph" and r.op_type == "MatMul"}
    addn = [r.device for r in rows if r.kind == "graph" and r.op_type == "AddN"]
    problems = []
    for i, target in enumerate(towers):
        seen = matmuls.get(f"tower_{i}/MatMul")
        if seen != target:
            problems.append(f"tower_{i}/MatMul on {seen}, expected {target}")
    if addn != [host]:
        problems.append(f"add_n on {addn}, expected [{host}]")
    if not result.value_ok:
        problems.append(f"sum wrong: max relative error {result.max_relative_error:.3g}")
    evidence = {"towers": towers, "matmul_devices": matmuls, "add_n_devices": addn,
                "max_relative_error": result.max_relative_error}
    if problems:
        return Finding("placement.multitower", "fail",
                       "multi-tower matmul: " + "; ".join(problems), evidence,
                       title=f"multi-tower matmul: {len(problems)} problem(s)",
                       advice="Each tower's ops must sit under its own tf.device scope; the "
                              "sum belongs on the host.")
    return Finding(
        "placement.multitower", "ok",
        f"multi-tower matmul ran one tower on each of {len(towers)} devices and add_n summed "
        f"them on {host}; the sum matches numpy (max relative error "
        f"{result.max_relative_error:.1e})",
        evidence,
        title=f"multi-tower matmul: one tower on each of {len(towers)} devices, sum right",
    )
