"""`gpudiag explain PATH`: where the steps' time went in traces that already exist.

PATH is a TensorBoard logdir, a ``plugins/profile/<run>`` directory, or one
``.xplane.pb`` file (what ``tf.keras.callbacks.TensorBoard(profile_batch=...)``,
``tf.profiler.experimental.start/stop`` and gpudiag's own runs write). Every trace under
it is read (gpudiag.readers.stepbreakdown, xprof's readers; no TensorFlow, no GPU, nothing run) and
gets one finding per trace, ``explain.bottleneck[.<host>]``: the breakdown per device and
the bottleneck (gpudiag.verdicts.bottleneck), as `gpudiag run` gives for its own window.
What a trace cannot tell (the program's tf.data calls and source lines) is not guessed:
a trace of a `gpudiag run` (``<run>/program-<pid>/plugins/profile/...``) is read with
what that run recorded of its program (gpudiag.run.windowfacts: the op placement, so
``/device:CPU:0`` stays itself; the tf.data calls and their lines; the loop), as the run
read it.

One breakdown per trace, whichever command reads it: a trace of a gpudiag scaling run
(``<run>/<config>/plugins/profile/<ts>/<host>.xplane.pb``) is read with the op placement
and replica devices that run recorded (read with gpudiag.rundir.load_run: the child
``children/scaling-<n>dev/``;
before issue 30 ``children/<config>/``), as `scaling` reads it; a
CPU trace with no recorded placement is one host row, and the
finding says devices cannot be told apart (virtual CPU devices share the host's plane).

``explained(path, logdir, ui)``: the same, as a typed Run: written into a run directory
under ``logdir``, or kept in memory when there is none (gpudiag.session.MemorySession):
`gpudiag diff` on traces and the library's ``gpudiag.explain`` (gpudiag.api).
"""

from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import Any

from gpudiag.errors import UsageError
from gpudiag.layout import TAG_EXPLAIN
from gpudiag.layout.evidence import STEP_PARTS
from gpudiag.layout.units import ms_number, share
from gpudiag.markdown import markdown_table
from gpudiag.readers import stepbreakdown, steprecords, traces, xspacescan
from gpudiag.report import Finding
from gpudiag.run import windowfacts
from gpudiag.run.windowfacts import WindowFacts
from gpudiag.rundir import Run, RunDirError, check_confined, load_run
from gpudiag.rundir.confine import MAX_TRACE_BYTES, check_tree, inside, walk
from gpudiag.rundir.unsaved import unsaved_run
from gpudiag.session import MemorySession, RunSession
from gpudiag.ui import Ui
from gpudiag.verdicts import bottleneck

XPLANE_SUFFIX = ".xplane.pb"

# What the profiler wrote before it saved XSpace traces: a Chrome trace and each tool's
# data converted at capture time (tensorflow/profiler's demo logdir of 2020 holds them).
OLDER_SUFFIXES = (".trace.json.gz", ".overview_page.pb", ".input_pipeline.pb",
                  ".tensorflow_stats.pb", ".op_profile.json", ".overview_page.json")


def find_traces(path: Path, *, max_bytes: int = MAX_TRACE_BYTES) -> list[Path]:
    """The traces PATH names; a UsageError (exit 2, one line) when it names none, or one
    that cannot be read: a path that cannot be looked up (a parent that cannot be
    searched, a name too long), a directory that cannot be read, an empty or corrupt
    trace, one that is not a regular file inside PATH (a FIFO: never opened), or one
    above ``max_bytes`` (``check_trace``). A readable trace is read whatever it holds."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise UsageError(f"{path} does not exist") from None
    except OSError as exc:
        raise UsageError(f"cannot look up {_short(path)}: {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        if not path.name.endswith(XPLANE_SUFFIX):
            raise UsageError(f"{path} is not a profiler trace (*{XPLANE_SUFFIX})")
        check_trace(path, path.parent, max_bytes)
        return [path]
    walked = walk(path, lambda name: name.endswith(XPLANE_SUFFIX))
    found = walked.found
    if walked.skipped:  # a trace may be in what was not looked into
        where, why = walked.skipped[0]
        raise UsageError(f"cannot read {_short(where)}: {why}" + (
            f" ({len(found)} trace(s) found elsewhere under {_short(path)})" if found else ""))
    if not found:
        older = [p.name for p in walk(path, lambda name: name.endswith(OLDER_SUFFIXES)).found]
        if older:
            raise UsageError(
                f"no profiler trace (*{XPLANE_SUFFIX}) under {path}, only profile data of "
                f"the older format ({', '.join(older[:3])}{', ...' if len(older) > 3 else ''}): "
                f"gpudiag reads the {XPLANE_SUFFIX} traces TensorFlow 2.4 and later write")
        raise UsageError(f"no profiler trace (*{XPLANE_SUFFIX}) under {path}")
    for trace in found:
        check_trace(trace, path, max_bytes)
    return found


def _short(path: Path) -> str:
    """A path for a one-line message: a name over 255 bytes is cut."""
    text = str(path)
    return text if len(text) <= 200 else f"{text[:120]}...{text[-60:]}"


def check_trace(trace: Path, root: Path, max_bytes: int = MAX_TRACE_BYTES) -> None:
    """UsageError unless ``trace`` is a regular file inside ``root`` of at most
    ``max_bytes`` (stat'ed first, never opened otherwise: gpudiag.rundir.check_confined;
    0: no limit), can be read and is framed as an XSpace within the bounds of what
    gpudiag reads (gpudiag.readers.xspacescan: its planes, lines and empty events counted
    before xprof's reader builds an object for each): empty, unreadable, corrupt (a tag or
    length that is not protobuf's, a field that runs past the end) or past a bound is one
    line. Cheap: the fields' tags and lengths only (the breakdown reads the rest)."""
    try:
        check_confined(trace, root, max_bytes=max_bytes or 2**63)
    except RunDirError as exc:
        more = (" (--max-trace-mb lifts it; reading a trace costs about 5 times its size "
                "in memory)") if "above the" in exc.message else ""
        raise UsageError(f"profiler trace {exc.message}{more}") from None
    try:
        with trace.open("rb") as f:
            data = f.read(max_bytes + 1 if max_bytes else -1)
    except OSError as exc:
        raise UsageError(f"cannot read {_short(trace)}: {exc.strerror}") from None
    if not data:
        raise UsageError(f"{_short(trace)} is empty (0 bytes): not a profiler trace "
                         "(the profiler was stopped before it wrote it?)")
    try:
        xspacescan.check(data)
        problem = None
    except xspacescan.Refused as exc:
        problem = str(exc)
    del data
    if problem is None:
        problem = _not_xspace(trace)
    if problem:
        raise UsageError(f"{_short(trace)} is not a readable profiler trace: {problem}")


def _not_xspace(trace: Path) -> str | None:
    """Why xprof's own reader refuses the file (None: it parses, or xprof is not importable,
    which the breakdown reports): a file whose top-level fields are well formed can still
    hold a plane that is not one. One parse, about 6 ms a MB, before the run directory."""
    try:
        from xprof.profile_data import ProfileData
    except ImportError:
        return None
    try:
        with ProfileData.from_file(str(trace)):
            return None
    except Exception as exc:  # the C reader raises plain ValueError/RuntimeError
        return f"xprof's reader: {exc}"


def label(trace: Path, root: Path, many: bool) -> str:
    """A finding id suffix per trace: its host and, with several, its profile run."""
    if not many:
        return ""
    host = trace.name[:-len(XPLANE_SUFFIX)]
    where = trace.parent.name if trace.parent != root else ""
    text = f"{where}.{host}" if where else host
    return "." + re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-")


def recorded_placement(trace: Path, within: Path | None = None
                       ) -> tuple[dict[str, str] | None, list[str]]:
    """The op placement and replica devices a gpudiag scaling run recorded for the
    configuration this trace belongs to; (None, []) when the trace is not one of a run,
    or, given ``within`` (`gpudiag mcp`'s logdir), when that run is not wholly inside it
    (gpudiag.rundir.confine: nothing outside is read)."""
    config = trace.parents[3] if len(trace.parents) > 3 else None
    if config is None or trace.parents[1].name != "profile":
        return None, []
    if within is not None and not _confined(config.parent, within):
        return None, []
    try:
        train = _recorded_train(config)
        op_devices, devices = train.get("op_devices"), train.get("devices")
    except (RunDirError, OSError, ValueError, KeyError, TypeError, IndexError,
            AttributeError):
        return None, []
    if not isinstance(op_devices, dict) or not op_devices or not isinstance(devices, list):
        return None, []
    return ({str(k): str(v) for k, v in op_devices.items()}, [str(d) for d in devices])


def _recorded_window(trace: Path, within: Path | None) -> WindowFacts | None:
    """What the `gpudiag run` whose program wrote ``trace`` recorded of its window (the
    placement, the tf.data calls and their lines, the loop: gpudiag.run.windowfacts);
    None when the trace is not one of a run, or, given ``within``, that run is not
    wholly inside it."""
    run_dir = trace.parents[4] if len(trace.parents) > 4 else None
    if run_dir is None or (within is not None and not _confined(run_dir, within)):
        return None
    try:
        return windowfacts.recorded(trace)
    except (RunDirError, OSError, ValueError):
        return None


def _confined(run_dir: Path, within: Path) -> bool:
    try:
        check_tree(within, inside(within, run_dir))
    except RunDirError:
        return False
    return True


def _recorded_train(config: Path) -> Any:
    """The training result of configuration run ``config``, read through the one reader of
    a run directory (gpudiag.rundir): in ``children/<config>/`` (one child per
    configuration, before issue 30) or in the count child whose config lists it among its
    ``logdirs`` (``children/scaling-<n>dev/``)."""
    run = load_run(config.parent)
    own = run.children.get(config.name)
    if own is not None and own.result:
        return own.result["result"]["train"]
    for child in run.children.values():
        names = [Path(d).name for d in (child.config or {}).get("logdirs") or []]
        if config.name in names and child.result:
            outcome = child.result["result"]["outcomes"][names.index(config.name)]
            return outcome["result"]["train"]
    raise KeyError(config.name)


def _row(trace: str, d: steprecords.DeviceBreakdown) -> list[Any]:
    m = d.mean()
    if m is None:
        return [trace, d.device, d.kernels, ""] + [""] * len(STEP_PARTS)
    return [trace, d.device, d.kernels, ms_number(m.period_s)] + [
        share(m.share(getattr(m, f"{k}_s"))) for k in STEP_PARTS]


def run(session: RunSession, path: Path, *, ui: Ui, within: Path | None = None,
        max_bytes: int = MAX_TRACE_BYTES) -> None:
    """Every trace under PATH explained into ``session`` (``within``: read nothing outside
    that directory: recorded_placement; ``max_bytes``: the largest trace read)."""
    files = find_traces(path, max_bytes=max_bytes)
    root = path if path.is_dir() else path.parent
    rows: list[list[Any]] = []
    data: list[dict[str, Any]] = []
    for trace in files:
        check_id = "explain.bottleneck" + label(trace, root, len(files) > 1)
        shown = str(trace.relative_to(root)) if trace.is_relative_to(root) else str(trace)
        ui.say(f"reading {shown}")
        window = _recorded_window(trace, within)
        op_devices, replicas = (window.op_devices, window.devices) if window else \
            recorded_placement(trace, within)
        facts = window.facts if window else bottleneck.ProgramFacts(replicas=replicas)
        try:
            result = stepbreakdown.breakdown(trace, op_devices, replicas)
        except traces.TraceError as exc:
            session.add(Finding(check_id, "fail", f"{shown}: {exc}", {"trace": str(trace)},
                                title="the trace could not be broken down into step parts",
                                advice="The file parsed, but the breakdown could not be made "
                                "(the message says why: xprof not importable, or its "
                                "analysis failed); reinstall tensorboard-plugin-profile."))
            continue
        session.add(bottleneck.bottleneck(result, None, facts, check_id=check_id))
        rows += [_row(shown, d) for d in result.devices]
        data.append(result.to_dict())
    session.set("explain", {"path": str(path), "traces": data})
    session.text(TAG_EXPLAIN, markdown_table(
        ["trace", "device", "kernels/ops", "step ms", *STEP_PARTS], rows))


def explained(path: Path, logdir: Path | None, ui: Ui, *, within: Path | None = None,
              argv: list[str] | None = None) -> Run:
    """PATH's traces explained (``find_traces``' UsageError first, before any run
    directory): into a run directory under ``logdir``, read back with load_run, or, with no
    logdir, in memory (nothing written; the Run's path is PATH). ``within``: ``run``'s;
    ``argv``: the report's (RunSession)."""
    find_traces(path)
    if logdir is None:
        memory = MemorySession("explain", path, argv=argv)
        with memory:
            run(memory, path, ui=ui, within=within)
        return unsaved_run(memory.report, path)
    with RunSession("explain", logdir, argv=argv) as session:
        run(session, path, ui=ui, within=within)
    return load_run(session.run_dir)
