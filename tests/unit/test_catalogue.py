"""gpudiag.catalogue: every entry against its real text; matching lines and crashes."""

from __future__ import annotations

import re

import pytest
from helpers import TESTS_DIR

from gpudiag import catalogue
from gpudiag.catalogue import matching

CAPTURED = [ln for ln in (TESTS_DIR / "data" / "tf_messages_cpu_2.21.txt").read_text()
            .splitlines() if ln and not ln.startswith("#")]


@pytest.mark.parametrize("entry", catalogue.ENTRIES + catalogue.FIT_INPUT_ENTRIES,
                         ids=lambda e: e.id)
def test_every_entry_matches_its_example_and_says_what_to_do(entry: catalogue.Entry) -> None:
    assert entry.search(entry.example), entry.id
    assert entry.meaning and entry.fix and entry.kind in ("log", "crash")
    assert entry.source == "captured" or entry.source == "binary" or \
        entry.source.startswith("python: ")
    re.compile(entry.pattern)


@pytest.mark.parametrize("entry", [e for e in catalogue.ENTRIES if e.source == "captured"],
                         ids=lambda e: e.id)
def test_captured_entries_match_text_tensorflow_really_printed(entry: catalogue.Entry) -> None:
    assert any(entry.search(line) for line in CAPTURED), \
        f"{entry.id}: no captured line matches {entry.pattern!r}"


def test_ids_are_unique() -> None:
    ids = [e.id for e in catalogue.ENTRIES]
    assert len(ids) == len(set(ids))


def test_match_lines_counts_each_known_message_and_keeps_the_first_line() -> None:
    lines = [*CAPTURED, CAPTURED[1], "an unrelated line of the program's own output"]
    found = {m.entry.id: m for m in catalogue.match_lines(lines)}
    assert found["cuda-drivers-missing"].count == 2
    assert found["cuda-drivers-missing"].first == CAPTURED[1].strip()
    assert {"onednn-on", "cpu-instructions", "cuinit-failed", "mirrored-devices",
            "retracing"} <= set(found)
    assert all(m.entry.kind == "log" for m in found.values())  # crashes are matched apart


def test_match_crash_explains_the_exceptions_seen_in_real_programs() -> None:
    invalid = catalogue.match_crash(
        "InvalidArgumentError", "Could not satisfy device specification '/job:localhost/"
        "replica:0/task:0/device:GPU:3'. enable_soft_placement=0. Supported device types "
        "[CPU].")
    assert invalid is not None and invalid.id == "invalid-device"
    late = catalogue.match_crash("RuntimeError",
                                 "Physical devices cannot be modified after being initialized")
    assert late is not None and late.id == "configured-after-init"
    assert "before any op" in late.fix
    average = catalogue.match_crash("ValueError", "Invalid value passed for `per_example_loss`. "
                                    "Expected a tensor with at least rank 1. Received "
                                    "per_example_loss=2.0 with rank 0")
    assert average is not None and "Reduction.NONE" in average.fix
    assert catalogue.match_crash("ZeroDivisionError", "division by zero") is None


def test_gpu_log_lines_for_env_are_the_gpu_library_messages() -> None:
    text = "\n".join(CAPTURED)
    lines = catalogue.gpu_log_lines(text)
    assert any("Could not find cuda drivers" in ln for ln in lines)
    assert any("failed call to cuInit" in ln for ln in lines)
    assert not any("oneDNN" in ln for ln in lines)
    assert catalogue.by_id("gpu-libraries-missing").topic == "gpu-libraries"


def test_one_catalogue_with_the_cluster_entries_and_unique_ids() -> None:
    ids = [e.id for e in catalogue.all_entries()]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    # a multi-worker message met by `gpudiag run` is explained like any other
    line = ("I0000 00:00:1795333000.000000   123 auto_shard.cc:799] AUTO sharding policy "
            "will apply DATA sharding policy as it failed to apply FILE sharding policy "
            "because of the following reason: Found an unshardable source dataset: name: "
            "\"TensorSliceDataset/_2\"")
    (found,) = catalogue.match_lines([line])
    assert found.entry.id == "auto-shard-data" and found.entry.source == "captured"


def test_the_literal_prefilter_finds_every_match_the_entries_alone_find() -> None:
    """match_lines looks for each entry's required literal before its regex: it must
    miss nothing. Every log entry's example and the captured text, each with the
    program's own lines around it, fed in pieces as `run` feeds the program's stderr."""
    entries = [e for e in catalogue.all_entries() if e.kind == "log"]
    lines = [text for e in entries for text in (f"step {len(e.id)}: loss 0.5", e.example,
                                                e.example.upper(), e.example[5:])]
    lines += CAPTURED + [ln.replace("GPU", "gpu") for ln in CAPTURED]
    matcher = catalogue.log_matcher()
    for start in range(0, len(lines), 7):
        matcher.feed(lines[start:start + 7])
    alone = {e.id: sum(1 for ln in lines if e.search(ln)) for e in entries}
    assert {m.entry.id: m.count for m in matcher.matches()} == \
        {k: v for k, v in alone.items() if v}
    assert {e.id for e in entries} <= {m.entry.id for m in matcher.matches()}
    # the literal a pattern must contain, from Python's own parser
    assert matching._required_literal(r"failed call to cuInit: (?P<detail>.*)") == \
        "failed call to cuInit: "
    assert matching._required_literal(r"(?i)out of memory") == ""  # case ignored: none
    assert matching._required_literal(r"a|b") == ""  # an alternation: none certain
