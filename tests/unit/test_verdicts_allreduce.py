"""The all-reduce's gradient bytes and achieved bandwidth in run.bottleneck: plain data."""

from __future__ import annotations

import pytest
from test_verdicts_bottleneck import breakdown

from gpudiag.verdicts import bottleneck as bn
from gpudiag.verdicts.allreduce import gradient_bytes

REPLICAS = ["/job:localhost/replica:0/task:0/device:GPU:0",
            "/job:localhost/replica:0/task:0/device:GPU:1"]


def test_gradient_bytes_are_one_replica_copy_of_the_captured_variables() -> None:
    seen = {"/job:localhost/replica:0/task:0/device:GPU:0": 4000,
            "/job:localhost/replica:0/task:0/device:GPU:1": 4000,
            "/job:localhost/replica:0/task:0/device:CPU:0": 8}  # a step counter, say
    assert gradient_bytes(seen, REPLICAS) == 4000
    assert gradient_bytes(seen, []) is None  # not a MirroredStrategy program
    assert gradient_bytes(None, REPLICAS) is None  # the hooks saw no variables
    assert gradient_bytes({"/device:CPU:0": 8}, REPLICAS) is None  # none on a replica


def test_communication_bound_step_gives_bytes_and_achieved_bandwidth() -> None:
    b = breakdown(("/device:GPU:0", 10, 5, 4, 0, 1, 0, 0),
                  ("/device:GPU:1", 10, 5, 4, 0, 1, 0, 0), source="device-plane")
    f = bn.bottleneck(b, None, bn.ProgramFacts(gradient_bytes=16 * 2**20))
    assert f.status == "warn" and f.evidence["causes"][0] == "communication-bound"
    assert f.evidence["allreduce"]["gradient_bytes_per_replica"] == 16 * 2**20
    assert f.evidence["allreduce"]["achieved_bytes_per_s"] == pytest.approx(16 * 2**20 / 4e-3)
    assert ("communication-bound: collectives (all-reduce) take 40 % of the step (4.00 ms of "
            "10.0 ms); 16.0 MiB of gradients per replica per step (the sizes of its "
            "trainable variables) all-reduced in 4.00 ms: 4.19 GB/s achieved") in f.message


def test_without_the_bytes_or_the_time_nothing_is_guessed() -> None:
    comm = breakdown(("/device:GPU:0", 10, 5, 4, 0, 1, 0, 0), source="device-plane")
    f = bn.bottleneck(comm, None)
    assert f.evidence["allreduce"] is None and "gradients" not in f.message
    quiet = breakdown(("/device:GPU:0", 10, 9, 0, 0, 1, 0, 0), source="device-plane")
    g = bn.bottleneck(quiet, None, bn.ProgramFacts(gradient_bytes=4000))
    assert g.evidence["allreduce"] is None and "gradients" not in g.message
    small = breakdown(("/device:GPU:0", 10, 7, 1, 0, 1, 1, 0), source="device-plane")
    # under 20 %: evidence, no message
    h = bn.bottleneck(small, None, bn.ProgramFacts(gradient_bytes=4000))
    assert h.status == "ok" and h.evidence["allreduce"]["gradient_bytes_per_replica"] == 4000
    assert "gradients" not in h.message
