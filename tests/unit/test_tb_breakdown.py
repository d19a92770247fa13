"""The step breakdown in TensorBoard, from plain findings through a real RunSession into
real event files, read back with TensorBoard's own EventAccumulator."""

from __future__ import annotations

from pathlib import Path

from helpers import breakdown_picture
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from test_verdicts_bottleneck import breakdown

from gpudiag import layout
from gpudiag.report import Finding
from gpudiag.session import RunSession
from gpudiag.tb import breakdown as tb_breakdown
from gpudiag.verdicts import bottleneck as bn
from gpudiag.verdicts import scaling_bottleneck as sb

TWO = breakdown(("/device:CPU:1", 16, 11, 3, 0, 1, 1, 0), ("/device:CPU:2", 16, 9, 3, 0, 1, 3, 0))


def test_a_bar_per_device_of_every_bottleneck_finding_in_report_order() -> None:
    findings = [
        Finding("scaling.learning", "ok", "learned", {"parts_s": {"x": {}}}),  # not ours
        sb.scaling_bottleneck(sb.ConfigTrace(
            "towers-1dev", breakdown(("/device:CPU:1", 10, 9, 0, 0, 1, 0, 0)), None,
            ["/device:CPU:1"], 1)),
        sb.scaling_bottleneck(sb.ConfigTrace("towers-2dev", TWO, None,
                                             ["/device:CPU:1", "/device:CPU:2"], 2)),
        sb.scaling_bottleneck(sb.ConfigTrace("towers-4dev", None, "no profiler window", [], 4)),
    ]
    bars = tb_breakdown.bars(findings)
    assert [b.label for b in bars] == ["towers-1dev CPU:1", "towers-2dev CPU:1",
                                       "towers-2dev CPU:2"]
    assert bars[2].parts_ms == {"compute": 9, "communication": 3, "copy": 0, "input": 0,
                                "host": 1, "idle": 3}
    assert bars[2].period_ms == 16
    run = [bn.bottleneck(TWO, None), bn.bottleneck(TWO, None, check_id="run.bottleneck.p2")]
    assert [b.label for b in tb_breakdown.bars(run)] == ["CPU:1", "CPU:2", "p2 CPU:1",
                                                         "p2 CPU:2"]


def test_the_session_writes_the_picture_and_the_finding_first(tmp_path: Path) -> None:
    with RunSession("run", tmp_path / "runs") as s:
        s.add(Finding("run.outcome", "fail", "exit 1", {}))
        s.add(bn.bottleneck(breakdown(("/device:CPU:0", 10, 3, 0, 5, 2, 0, 0)), None,
                            bn.ProgramFacts(loop="Model.fit")))
    width, height, _, text = breakdown_picture(s.run_dir)
    assert width > height  # one bar: wide, not tall
    assert text.startswith("- **WARN** `run.bottleneck`: Model.fit: 10.0 ms per step")
    assert "input-bound: 50 % of the step" in text


def test_more_bars_make_a_taller_picture(tmp_path: Path) -> None:
    heights = []
    for n in (1, 8):
        devices = [(f"/device:GPU:{i}", 10, 6, 1, 1, 1, 1, 0) for i in range(n)]
        with RunSession("explain", tmp_path / f"runs{n}") as s:
            s.add(bn.bottleneck(breakdown(*devices, source="device-plane"), None,
                                check_id="explain.bottleneck"))
        heights.append(breakdown_picture(s.run_dir)[1])
    assert heights[1] > heights[0] + 150


def test_without_a_breakdown_no_picture_and_a_skip_still_comes_first(tmp_path: Path) -> None:
    tags = []
    for name, extra in (("plain", []), ("skip", [bn.bottleneck(None, "no profiler window")])):
        with RunSession("run", tmp_path / name) as s:
            s.add(Finding("run.outcome", "ok", "exit 0", {}))
            for f in extra:
                s.add(f)
        acc = EventAccumulator(str(s.run_dir / layout.REPORT_TB_RUN),
                               size_guidance={"tensors": 0})
        acc.Reload()
        assert not (s.run_dir / layout.BREAKDOWN_PNG).exists()
        tags.append(set(acc.Tags()["tensors"]))
    assert tags[0] == {layout.TAG_VERDICT, layout.TAG_FINDINGS, layout.TAG_REPORT}
    assert tags[1] == {layout.TAG_VERDICT, layout.TAG_BOTTLENECK, layout.TAG_FINDINGS,
                       layout.TAG_REPORT}
