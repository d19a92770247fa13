"""gpudiag.run.streams: what reaches the user's terminal, line by line (real TF 2.21 text)."""

from __future__ import annotations

import os
import threading
from io import BytesIO
from pathlib import Path

from gpudiag.run import streams
from gpudiag.run.streams import FilterState, LineFilter

PRE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
ONEDNN = ("I0000 00:00:1795326862.232320   29564 port.cc:153] oneDNN custom operations are on. "
          "You may see slightly different numerical results.")
CUDA = ("I0000 00:00:1795326862.232608   29564 cudart_stub.cc:31] Could not find cuda drivers "
        "on your machine, GPU will not be used.")
CPU_GUARD = ("I0000 00:00:1795326862.272462   29564 cpu_feature_guard.cc:227] This TensorFlow "
             "binary is optimized to use available CPU instructions in performance-critical "
             "operations.")
CPU_GUARD_2 = ("To enable the following instructions: AVX2 FMA, in other operations, rebuild "
               "TensorFlow with the appropriate compiler flags.")
CUINIT = ("E0000 00:00:1795326863.830691   29564 cuda_platform.cc:52] failed call to cuInit: "
          "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)")
PLACER = ("I0000 00:00:1795326863.841538   29564 placer.cc:162] input: (_Arg): "
          "/job:localhost/replica:0/task:0/device:CPU:0")
EXECUTE = ("I0000 00:00:1795326863.850618   29564 execute.cc:1775] Executing op _EagerConst in "
           "device /job:localhost/replica:0/task:0/device:CPU:0")
WARN = ("W0000 00:00:1795326871.759195   29653 dataset.cc:997] Input of GeneratorDatasetOp::"
        "Dataset will not be optimized")
OLD_STYLE = ("2023-05-01 10:00:00.123456: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1635]"
             " Created device /job:localhost/replica:0/task:0/device:GPU:0")
STDOUT_PLACER = "StatefulPartitionedCall/dense/MatMul: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0"  # noqa: E501


def shown(lines: list[str], stream: str = "stderr", level: int = 0,
          state: FilterState | None = None) -> list[str]:
    state = state or FilterState(user_level=level)
    return [ln for ln in lines if streams.classify(ln, state, stream)]


def test_at_the_default_level_everything_but_the_placement_log_passes() -> None:
    lines = [PRE, ONEDNN, CUDA, CPU_GUARD, CPU_GUARD_2, CUINIT, PLACER, EXECUTE, WARN,
             "Epoch 1/2", "Traceback (most recent call last):"]
    assert shown(lines) == [PRE, ONEDNN, CUDA, CPU_GUARD, CPU_GUARD_2, CUINIT, WARN,
                            "Epoch 1/2", "Traceback (most recent call last):"]


def test_the_users_level_hides_what_tensorflow_would_have_hidden() -> None:
    # Measured with TF 2.21: at level 1 the pre-init library-load lines still print,
    # cpu_feature_guard (and its second line) does not, cuInit's E line does.
    lines = [PRE, ONEDNN, CUDA, CPU_GUARD, CPU_GUARD_2, PRE, ONEDNN, CUDA, CUINIT, WARN,
             OLD_STYLE, "user output"]
    assert shown(lines, level=1) == [PRE, ONEDNN, CUDA, PRE, ONEDNN, CUDA, CUINIT, WARN,
                                     "user output"]
    assert shown(lines, level=2) == [PRE, ONEDNN, CUDA, PRE, ONEDNN, CUDA, CUINIT,
                                     "user output"]
    assert shown(lines, level=3) == [PRE, ONEDNN, CUDA, PRE, ONEDNN, CUDA, "user output"]


def test_placement_lines_pass_once_the_program_asks_for_them() -> None:
    state = FilterState()
    assert shown([PLACER, EXECUTE], state=state) == []
    assert shown([STDOUT_PLACER], "stdout", state=state) == []
    assert shown(["GPUDIAG-RUN placement-asked"], state=state) == []
    assert state.placement_asked
    assert shown([PLACER, EXECUTE], state=state) == [PLACER, EXECUTE]
    assert shown([STDOUT_PLACER], "stdout", state=state) == [STDOUT_PLACER]


def test_lines_caused_by_gpudiag_itself_stay_out() -> None:
    state = FilterState()
    lines = ["GPUDIAG-RUN quiet-begin", WARN, "GPUDIAG-RUN quiet-end", WARN,
             "GPUDIAG-RUN hook-error ImportError: no module"]
    assert shown(lines, state=state) == [WARN]
    assert state.hook_errors == ["ImportError: no module"]


def test_line_filter_waits_for_whole_lines_and_lets_a_progress_bar_through() -> None:
    state = FilterState()
    f = LineFilter(state, "stderr")
    assert f.feed(PLACER[:30].encode()) == b""
    assert f.feed((PLACER[30:] + "\n" + "user line\n").encode()) == b"user line\n"
    assert state.hidden_lines == 1
    assert f.feed(b"12/32 [=====>") == b""
    assert f.flush_partial() == b"12/32 [=====>"
    assert f.feed(b"....] done\n") == b"....] done\n"  # the rest of a line already shown


def test_pump_saves_everything_and_shows_the_filtered_part() -> None:
    read_fd, write_fd = os.pipe()
    saved, terminal = BytesIO(), BytesIO()
    closed = threading.Event()
    thread = streams.pump(read_fd, saved, terminal, LineFilter(FilterState(), "stderr"),
                          on_close=closed.set)
    data = f"{EXECUTE}\nhello\n{PLACER}\nbye".encode()
    os.write(write_fd, data)
    os.close(write_fd)
    thread.join(10)
    assert closed.is_set()
    assert saved.getvalue() == data
    assert terminal.getvalue() == b"hello\nbye"


def test_user_level_reads_like_tensorflow() -> None:
    assert [streams.user_level(v) for v in (None, "", "0", "2", "3", "9", "x")] == \
        [0, 0, 0, 2, 3, 3, 0]


def test_a_chunk_with_nothing_to_hide_passes_whole_and_the_rest_still_line_by_line() -> None:
    state = FilterState()
    f = LineFilter(state, "stderr")
    plain = b"".join(b"step %d loss 0.5 [ok]\n" % i for i in range(5000)) + b"12/32 ["
    assert f.feed(plain) == plain[:-len(b"12/32 [")]
    assert f.flush_partial() == b"12/32 ["
    mixed = f"]\n{PLACER}\nafter: 3]\n{PRE}\n{ONEDNN}\n".encode()
    assert f.feed(mixed) == f"]\nafter: 3]\n{PRE}\n{ONEDNN}\n".encode()
    assert state.hidden_lines == 1
    out = LineFilter(FilterState(), "stdout")
    assert out.feed(f"x\n{STDOUT_PLACER}\ny\n".encode()) == b"x\ny\n"
    assert out.feed(b"GPUDIAG-RUN quiet-begin\nz\n") == b"z\n"


class FullDisk(BytesIO):
    """A saved file on a disk that fills after ``room`` bytes (ENOSPC at the write)."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room

    def write(self, data: bytes) -> int:  # type: ignore[override]
        if self.tell() + len(data) > self.room:
            raise OSError(28, "No space left on device")
        return super().write(data)


def test_a_full_disk_stops_the_saving_not_the_output() -> None:
    read_fd, write_fd = os.pipe()
    terminal = BytesIO()
    failed: list[streams.SaveFile] = []
    saved = streams.SaveFile(FullDisk(1000), Path("/x/stdout.txt"), on_fail=failed.append)
    thread = streams.pump(read_fd, saved, terminal, LineFilter(FilterState(), "stdout"))
    data = b"".join(b"line %d\n" % i for i in range(200_000))
    writer = threading.Thread(target=lambda: (os.write(write_fd, data), os.close(write_fd)))
    writer.start()
    writer.join(30)
    thread.join(30)
    assert not thread.is_alive()
    assert terminal.getvalue() == data
    assert failed == [saved]
    assert saved.failure is not None and saved.failure.errno == 28
