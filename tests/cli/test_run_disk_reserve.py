"""gpudiag's saved copy of the output never takes the program's last free space (issue 26,
case 7): on a small filesystem holding both ``runs/`` and the program's checkpoint, the
copy stops at the reserve (said on gpudiag's stderr and as run.saved-output), the
program's own write succeeds and its exit code and stdout are what they are plainly. A
real 20 MB tmpfs (skipped, with the reason, where mount is refused) and SaveFile with a
filesystem of a given size behind the same interface as os.statvfs.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path

import pytest
from helpers import REPO, load_report, run_dirs

from gpudiag.run import streams

ENV = {**os.environ, "PYTHONPATH": str(REPO)}
#: 30 MB of output in lines, then a 1 MB checkpoint next to it; exit 1 if it cannot be saved.
CHATTY_THEN_CHECKPOINT = """
import pathlib, sys
where = pathlib.Path(sys.argv[1])
line = b'epoch 1 step 10 loss 0.123 ' * 3 + b'\\n'
for _ in range(30_000_000 // len(line)):
    sys.stdout.buffer.write(line)
sys.stdout.flush()
try:
    (where / 'checkpoint.bin').write_bytes(bytes(range(256)) * 4096)
except OSError as exc:
    print('checkpoint failed:', exc, file=sys.stderr)
    sys.exit(1)
print('checkpoint saved', flush=True)
"""


@contextlib.contextmanager
def small_disk(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.mark.slow
def test_the_saved_copy_leaves_the_programs_last_free_space(tmp_path: Path) -> None:
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    plain = subprocess.run([sys.executable, "-c", CHATTY_THEN_CHECKPOINT, str(plain_dir)],
                           capture_output=True, env=ENV, timeout=300, stdin=subprocess.DEVNULL)
    assert plain.returncode == 0, plain.stderr[-2000:]
    with small_disk(tmp_path / "disk", "20m") as disk:
        under = subprocess.run([sys.executable, "-m", "gpudiag", "run", "--quiet", "--logdir",
                                str(disk / "runs"), "--", sys.executable, "-c",
                                CHATTY_THEN_CHECKPOINT, str(disk)], capture_output=True,
                               env=ENV, timeout=300, stdin=subprocess.DEVNULL)
        assert under.returncode == plain.returncode, under.stderr[-3000:]
        assert under.stdout == plain.stdout
        ours = (disk / "checkpoint.bin").read_bytes()
        assert ours == (plain_dir / "checkpoint.bin").read_bytes()
        said = [ln for ln in under.stderr.decode().splitlines() if "for the program" in ln]
        assert len(said) == 1 and said[0].startswith("gpudiag: "), under.stderr[-3000:]
        (run_dir,) = run_dirs(disk / "runs")
        found = {f["id"]: f for f in load_report(run_dir)["findings"]}["run.saved-output"]
        assert found["status"] == "warn" and "before its disk filled" in found["message"]


#: 2.6 MB of output, a pause (the saved copy catches up), then a 1 MiB checkpoint on a 3 MiB
#: disk: with a reserve of 10 % of the disk (300 KiB) it failed under gpudiag, not plainly.
SMALL_DISK_PROGRAM = CHATTY_THEN_CHECKPOINT.replace("30_000_000", "2_600_000").replace(
    "sys.stdout.flush()\n", "sys.stdout.flush()\nimport time; time.sleep(1.5)\n", 1)


@pytest.mark.slow
def test_on_a_3_mib_disk_the_checkpoint_is_written_as_plainly(tmp_path: Path) -> None:
    """Issue 36, case 7: the reserve works on a 3 MiB disk as on a 3 TB one."""
    assert "time.sleep" in SMALL_DISK_PROGRAM
    with small_disk(tmp_path / "plain", "3m") as disk:
        plain = subprocess.run([sys.executable, "-c", SMALL_DISK_PROGRAM, str(disk)],
                               capture_output=True, env=ENV, timeout=120,
                               stdin=subprocess.DEVNULL)
    assert plain.returncode == 0, plain.stderr[-2000:]
    with small_disk(tmp_path / "under", "3m") as disk:
        under = subprocess.run([sys.executable, "-m", "gpudiag", "run", "--quiet", "--logdir",
                                str(disk / "runs"), "--", sys.executable, "-c",
                                SMALL_DISK_PROGRAM, str(disk)], capture_output=True,
                               env=ENV, timeout=120, stdin=subprocess.DEVNULL)
        assert under.returncode == 0, under.stderr[-3000:]
        assert under.stdout == plain.stdout
        assert (disk / "checkpoint.bin").stat().st_size == 1 << 20
        (run_dir,) = run_dirs(disk / "runs")
        found = {f["id"]: f for f in load_report(run_dir)["findings"]}["run.saved-output"]
        assert found["status"] == "warn"


class _Kept(BytesIO):
    """A saved file whose bytes stay readable after SaveFile closes it."""

    def close(self) -> None:
        self.closed_by_owner = True


class _Disk:
    """A filesystem of ``total`` bytes whose free space is what was not written to it."""

    def __init__(self, total: int, used: int) -> None:
        self.total, self.used = total, used
        self.asked = 0

    def space(self, _path: Path) -> tuple[int, int]:
        self.asked += 1
        return self.total - self.used, self.total


def test_save_file_stops_at_the_reserve_and_asks_the_disk_seldom(tmp_path: Path) -> None:
    disk = _Disk(total=4 << 30, used=(3 << 30) - (10 << 20))  # the 1 GiB reserve + 10 MB
    sink = _Kept()
    saved = streams.SaveFile(sink, tmp_path / "stdout.txt", space=disk.space)  # type: ignore[arg-type]
    chunk = b"x" * 4096
    while saved.failure is None:
        before = saved.saved_bytes
        saved.write(chunk)
        disk.used += saved.saved_bytes - before
    assert isinstance(saved.failure, streams.KeptFree)
    assert disk.total - disk.used >= streams.reserve_bytes(disk.total)
    assert len(sink.getvalue()) == saved.saved_bytes >= (10 << 20) - len(chunk)
    assert streams.reserve_bytes(3 << 20) == streams.reserve_bytes(3 << 40)  # 3 MiB, 3 TB
    assert disk.asked <= 12  # about once a MiB, not once a write
    saved.write(chunk)  # stopped for good
    assert len(sink.getvalue()) == saved.saved_bytes
