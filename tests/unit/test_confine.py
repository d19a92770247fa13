"""gpudiag.rundir.confine: a path named by someone else stays inside the logdir (`gpudiag
mcp`; the dashboard can share it), on real files, links and a FIFO."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpudiag.rundir import RunDirError
from gpudiag.rundir.confine import check_tree, inside


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "logdir"
    (root / "run" / "sub").mkdir(parents=True)
    (root / "run" / "report.json").write_text("{}")
    (root / "run" / "sub" / "same.json").symlink_to(root / "run" / "report.json")
    (root / "run" / "loop").symlink_to(root / "run")  # a loop inside: checked once
    (tmp_path / "outside.txt").write_text("secret")
    return root


def test_paths_inside_are_resolved(tree: Path) -> None:
    run = tree.resolve() / "run"
    assert inside(tree, "run") == run
    assert inside(tree, "run/sub/../report.json") == run / "report.json"
    assert inside(tree, str(run)) == run  # absolute, inside
    assert inside(tree, "run/sub/same.json") == run / "report.json"  # a link inside
    check_tree(tree, run)  # links inside, a loop: fine


@pytest.mark.parametrize(("name", "says"), [
    ("../outside.txt", "../outside.txt is outside the logdir"),
    ("../nothing-there", "../nothing-there is outside the logdir"),  # existence not told
    ("/etc/passwd", "/etc/passwd is outside the logdir"),
    ("missing", "missing: no such file or directory in the logdir"),
    ("bad\0name", "cannot be looked up"),
    ("x" * 5000, "cannot be looked up"),
])
def test_names_that_leave_or_are_not_there_are_refused(tree: Path, name: str,
                                                       says: str) -> None:
    with pytest.raises(RunDirError) as info:
        inside(tree, name)
    assert says in info.value.message and "\n" not in info.value.message
    assert "secret" not in info.value.message


def test_links_out_fifos_and_dangling_links_are_refused(tree: Path) -> None:
    run = tree / "run"
    (tree / "out").symlink_to(tree.parent / "outside.txt")
    with pytest.raises(RunDirError, match=r"^out is outside the logdir$"):
        inside(tree, "out")
    os.mkfifo(tree / "fifo")
    with pytest.raises(RunDirError, match=r"^fifo is not a regular file or a directory$"):
        inside(tree, "fifo")
    os.mkfifo(run / "sub" / "pipe")
    with pytest.raises(RunDirError, match=r"^run/sub/pipe is a FIFO, not a regular file"):
        check_tree(tree, inside(tree, "run"))
    (run / "sub" / "pipe").unlink()
    (run / "sub" / "gone").symlink_to(run / "nothing")
    with pytest.raises(RunDirError, match=r"^run/sub/gone is a symlink to nothing$"):
        check_tree(tree, inside(tree, "run"))
    (run / "sub" / "gone").unlink()
    (run / "sub" / "leak.json").symlink_to(tree.parent / "outside.txt")
    with pytest.raises(RunDirError, match=r"^run/sub/leak\.json is a symlink out of the logdir$"):
        check_tree(tree, inside(tree, "run"))
