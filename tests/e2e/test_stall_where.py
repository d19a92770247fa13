"""Where a stalled step waits, read from real threads' real stacks (the stall watch's own
capture, sys._current_frames, then stallwatch.classify): a tf.py_function running the
program's code, a queue, another thread's end, a lock, a tf.distribute.Server's join();
the program's own frame named on every thread. Real TensorFlow where TensorFlow is what
waits; each blocking is released by the test (events, not clocks)."""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from gpudiag.inprogram import stallwatch
from gpudiag.verdicts.run.live import describe_stall


@contextmanager
def blocked(target: Callable[[], Any], until: Callable[[list[dict[str, Any]]], bool],
            elsewhere: Callable[[list[dict[str, Any]]], bool] | None = None
            ) -> Iterator[dict[str, Any]]:
    """Run ``target`` on a thread (the stepping thread) until its stack shows it blocked
    (``until``), and another thread's too (``elsewhere``); yield classify's answer over
    every thread's stack at that moment."""
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    poll = threading.Event()
    for _ in range(12000):  # the thread's own progress decides, not a clock
        stacks = {ident: stallwatch._frames(f) for ident, f in sys._current_frames().items()
                  if ident != threading.get_ident()}
        stepping = stacks.pop(thread.ident or -1, [])
        if stepping and until(stepping) and (
                elsewhere is None or any(elsewhere(t) for t in stacks.values() if t)):
            break
        poll.wait(0.005)
    else:
        raise AssertionError(f"the thread never blocked: {stepping[-3:]}")
    yield stallwatch.classify(stepping, list(stacks.values()))
    thread.join(60)


def in_function(name: str) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda stack: stack[-1]["function"] == name


def _line(where: dict[str, Any]) -> str:
    return describe_stall({"where": where, "waited_s": 9.0, "timeout_s": 3.0, "steps": 4,
                           "loop": {"function": "train_step"}})


def test_a_py_function_that_blocks_is_named_with_its_own_line() -> None:
    import tensorflow as tf

    release = threading.Event()

    def slow_augment(x):  # the program's Python inside the step
        release.wait(60)  # BLOCKS HERE
        return x

    @tf.function
    def train_step(x):
        return tf.py_function(slow_augment, [x], tf.float32) * 2.0

    def py_function_waits(stack: list[dict[str, Any]]) -> bool:
        return stack[-1]["function"] == "wait" and "BLOCKS HERE" in stack[-3]["code"]

    with blocked(lambda: train_step(tf.ones([2])), in_function("quick_execute"),
                 py_function_waits) as where:
        release.set()
    assert where["kind"] == "py_function", where
    assert where["waiting"]["function"] == "slow_augment", where
    assert where["waiting"]["code"] == "release.wait(60)  # BLOCKS HERE"
    text = _line(where)
    assert "waits for a tf.py_function / numpy_function" in text
    assert "the py_function's code waits at test_stall_where.py:" in text


def test_a_server_join_is_named_as_such() -> None:
    import socket

    import tensorflow as tf

    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    server = tf.distribute.Server(
        tf.train.ClusterSpec({"ps": [f"localhost:{port}"]}), job_name="ps", task_index=0,
        protocol="grpc", start=True)
    inside = threading.Event()

    def serve() -> None:
        inside.set()
        server.join()  # SERVES

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    inside.wait(60)
    # join() is a C++ call: wait until the thread's innermost frame is server_lib's join
    for _ in range(2000):
        stack = stallwatch._frames(sys._current_frames()[thread.ident or -1])
        if stack[-1]["function"] == "join":
            break
        threading.Event().wait(0.005)
    where = stallwatch.classify(stack, [])
    assert where["kind"] == "server_join", where
    assert where["frame"]["code"] == "server.join()  # SERVES"
    assert "waits in tf.distribute.Server.join()" in _line(where)


def at_line(marker: str) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda stack: marker in stack[-1]["code"]


def test_a_queue_a_thread_join_and_a_lock_are_each_named_at_the_programs_line() -> None:
    q: queue.Queue[int] = queue.Queue()
    def next_batch() -> None:
        q.get()  # WAITS ON THE QUEUE

    with blocked(next_batch, in_function("wait")) as where:
        q.put(1)
    assert where["kind"] == "queue" and where["frame"]["function"] == "next_batch"
    assert "waits on a queue" in _line(where) and "WAITS ON THE QUEUE" in _line(where)

    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, daemon=True)
    worker.start()

    def wait_for_worker() -> None:
        worker.join()  # WAITS FOR THE THREAD

    with blocked(wait_for_worker, in_function("_wait_for_tstate_lock")) as where:
        stop.set()
    assert where["kind"] == "thread_join" and "WAITS FOR THE THREAD" in _line(where)

    lock = threading.Lock()
    lock.acquire()

    def take_lock() -> None:
        with lock:  # WAITS ON THE LOCK
            pass

    with blocked(take_lock, at_line("WAITS ON THE LOCK")) as where:
        lock.release()
    # `with lock` blocks in C with the program's frame innermost: the line is named
    assert where["frame"]["code"] == "with lock:  # WAITS ON THE LOCK", where
