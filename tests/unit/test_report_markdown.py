"""report.md and the Text tab's findings card read a finding's fields (gpudiag.report): the
card lists each finding by its title (a report without titles: its message), report.md
gives the title, the whole message and the actions (where, what, the predicted step)."""

from __future__ import annotations

from gpudiag.report import Action, Finding, Prediction, Report
from gpudiag.reportmd import summary_markdown, to_markdown


def _report() -> Report:
    report = Report("run", "runs/x")
    report.add(Finding(
        "run.bottleneck", "warn", "Model.fit: 32.6 ms per step ... (the whole message)",
        title="input-bound: 47 % of a 32.6 ms step waits for tf.data",
        actions=(Action("pass num_parallel_calls=tf.data.AUTOTUNE to Dataset.map",
                        "train.py:33", Prediction(0.0174, 0.0169, 0.018, "parallel map")),
                 Action("end the pipeline with .prefetch(tf.data.AUTOTUNE)", None,
                        Prediction(None, basis="not modelled")))))
    report.add(Finding("run.learning", "ok", "Model.fit: loss 2.3 -> 0.1 over 120 steps"))
    return report


def test_the_text_cards_list_each_finding_by_its_title() -> None:
    card = summary_markdown(_report())
    assert ("- **WARN** `run.bottleneck`: input-bound: 47 % of a 32.6 ms step waits for "
            "tf.data") in card.splitlines()
    assert "(the whole message)" not in card
    assert "- **OK** `run.learning`: Model.fit: loss 2.3 -> 0.1 over 120 steps" in card


def test_report_md_gives_the_title_message_and_actions() -> None:
    md = to_markdown(_report()).splitlines()
    at = md.index("## WARN `run.bottleneck`")
    section = md[at:at + 12]
    assert section[2] == "**input-bound: 47 % of a 32.6 ms step waits for tf.data**"
    assert section[4] == "Model.fit: 32.6 ms per step ... (the whole message)"
    assert "- at `train.py:33`: pass num_parallel_calls=tf.data.AUTOTUNE to Dataset.map; "\
           "predicted 17.4 ms a step (16.9-18.0) (parallel map)" in section
    assert "- end the pipeline with .prefetch(tf.data.AUTOTUNE); no prediction: not "\
           "modelled" in section


def test_report_md_names_evidence_too_long_to_write_whole_and_never_cuts_it() -> None:
    report = Report("run", "runs/x")
    report.add(Finding("run.devices", "warn", "no GPU", evidence={
        "shares": {"compute": 0.68, "host": 0.31, "idle": 0.0, "x" * 400: 1},
        "parts_s": {f"/device:GPU:{i}": {"period_s": 0.006} for i in range(2_000)},
        "devices": {f"/device:GPU:{i}": "busy 99 %" for i in range(20)},
        "gpus": [{"name": f"/physical_device:GPU:{i}"} for i in range(100)],
        "log": "line " * 200,
        "steps": 4}))
    evidence = {line.split("`")[1]: line.split(": ", 1)[1]
                for line in to_markdown(report).splitlines() if line.startswith("  - `")}
    assert evidence == {
        "shares": "(4 entries: whole in report.json)",  # its keys alone are too long
        "parts_s": "(2,000 entries: whole in report.json)",
        "devices": "(20 entries: " + ", ".join(f"`/device:GPU:{i}`" for i in range(20))
                   + ": whole in report.json)",
        "gpus": "(a list of 100 items: whole in report.json)",
        "log": "(1,000 characters: whole in report.json)",
        "steps": "4"}
    assert not any(line.endswith("...") for line in to_markdown(report).splitlines())


def test_report_md_opens_with_the_verdict_every_face_shows() -> None:
    """The verdict's entries (gpudiag.verdicts.headline's, as the terminal ends with them)
    come before the table, one item each, the fix under its entry, markdown's marks as
    text (a file name's underscores are not emphasis)."""
    verdict = [("gpudiag run: 0 failed, 1 warning",),
               ("bottleneck: input-bound: 47 % of a 32.6 ms step waits for input",
                "fix at my_train.py:33: pass num_parallel_calls=tf.data.AUTOTUNE")]
    md = to_markdown(_report(), verdict).splitlines()
    at = md.index("## Verdict")
    assert md[at + 1:at + 6] == [
        "", "- gpudiag run: 0 failed, 1 warning",
        "- bottleneck: input-bound: 47 % of a 32.6 ms step waits for input",
        r"  - fix at my\_train.py:33: pass num\_parallel\_calls=tf.data.AUTOTUNE", ""]
    assert at < md.index("| status | check | finding |")
    assert "## Verdict" not in to_markdown(_report())  # a report still being made: none
