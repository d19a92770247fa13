"""TensorFlow's cluster messages (gpudiag/cluster/messages.py) against what TensorFlow 2.21
really printed: tests/data/cluster_tf_2.21/ holds the whole stderr of real runs on this
machine, two worker processes on 127.0.0.1 each:

- never_formed: worker 0 started alone (worker 1 never did), stopped after 12 s;
- peer_died_w0: worker 1 exited (os._exit) at step 10, worker 0's log;
- leader_died_w1: worker 0 exited at step 10, worker 1's log;
- dup_second: a second process given task index 0 (the first one running);
- op_before_strategy: tf.constant before MultiWorkerMirroredStrategy();
- tf_config_after: the strategy created, then TF_CONFIG set (Python log at INFO);
- collective_timeout_w0: CommunicationOptions(timeout_seconds=5), worker 1 SIGSTOPped;
- keras3_fit_w0: Keras 3 Model.fit under MultiWorkerMirroredStrategy;
- sigterm_waiting_w0: worker 0 started alone, sent SIGTERM while it waited for worker 1
  (it went on waiting: TensorFlow's preemption notifier caught the signal);
- auto_shard_w0: a from_tensor_slices dataset distributed, TF_CPP_VMODULE=auto_shard=2
  (TensorFlow 2.21 logs this notice at VLOG level 2 only);
- tf1_chief_worker1_absent: tests/programs/tf1_between_graph.py's chief (worker 0) under
  `gpudiag run` with its ps running and worker 1 never started (its first 40 lines);
- keras3_datasetcreator: the tutorial's `tf.keras.utils.experimental.DatasetCreator(...)`
  under Keras 3.15;
- keras3_sharded_embedding: tests/programs/ps_tutorial_inprocess.py with its embedding
  large enough for the tutorial's partitioner to shard it, under Keras 3.15 (traceback,
  site-packages frames left out).
"""

from __future__ import annotations

import pytest
from helpers import TESTS_DIR

from gpudiag import catalogue
from gpudiag.cluster import messages

DATA = TESTS_DIR / "data" / "cluster_tf_2.21"


def found(name: str) -> dict[str, int]:
    return {s.entry.id: s.count for s in messages.scan((DATA / f"{name}.txt").read_text())}


@pytest.mark.parametrize(("capture", "expected"), [
    ("never_formed", {"cluster-waiting-for-tasks"}),
    ("peer_died_w0", {"cluster-waiting-for-tasks", "cluster-peer-unhealthy"}),
    ("leader_died_w1", {"cluster-peer-connection-lost"}),
    ("dup_second", {"grpc-port-in-use", "grpc-server-failed"}),
    ("op_before_strategy", {"collective-after-startup"}),
    ("tf_config_after", {"single-worker-mwms"}),
    ("collective_timeout_w0", {"cluster-waiting-for-tasks", "collective-timeout"}),
    ("keras3_fit_w0", {"cluster-waiting-for-tasks", "keras3-fit-perreplica"}),
    ("auto_shard_w0", {"cluster-waiting-for-tasks", "auto-shard-data"}),
    ("sigterm_waiting_w0", {"cluster-waiting-for-tasks", "tf-caught-sigterm"}),
    ("tf1_chief_worker1_absent", {"session-waiting-for-task"}),
    ("keras3_datasetcreator", {"keras3-datasetcreator-removed"}),
    ("keras3_sharded_embedding", {"keras3-sharded-variable"}),
])
def test_each_captured_run_is_recognised_as_what_happened(capture: str,
                                                          expected: set[str]) -> None:
    assert set(found(capture)) == expected


def test_every_entry_matches_its_example_and_captured_ones_occur_in_a_capture() -> None:
    captured = "\n".join(p.read_text() for p in sorted(DATA.glob("*.txt")))
    ids = [e.id for e in messages.ENTRIES]
    assert len(ids) == len(set(ids))
    for e in messages.ENTRIES:
        assert e.search(e.example), e.id
        assert e.meaning and e.fix and e.kind in ("log", "crash")
        if e.source == "captured":
            assert e.example.strip() in captured, e.id
        else:
            assert e.source.startswith("python: tensorflow/"), e.id


def test_the_tasks_tensorflow_waited_for_and_declared_dead() -> None:
    never = (DATA / "never_formed.txt").read_text()
    assert messages.stragglers(never) == ["worker-1"]
    died = (DATA / "peer_died_w0.txt").read_text()
    assert messages.stragglers(died) == []  # it said "Waiting for 0/2" later: all came
    assert messages.unhealthy_tasks(died) == ["worker-1"]
    assert messages.unhealthy_tasks(never) == []
    assert messages.lost_peers(died) == ["worker-1"]
    assert messages.lost_peers((DATA / "leader_died_w1.txt").read_text()) == ["worker-0"]
    lost = catalogue.by_id("cluster-peer-connection-lost").search(
        (DATA / "leader_died_w1.txt").read_text())
    assert lost is not None and lost.group("task") == "/job:worker/replica:0/task:0"


def test_the_port_in_use_names_the_address_tensorflow_bound() -> None:
    m = catalogue.by_id("grpc-port-in-use").search((DATA / "dup_second.txt").read_text())
    assert m is not None and m.group("address").startswith("0.0.0.0:")


def test_keras3_entry_names_the_known_issues_and_the_legacy_path() -> None:
    e = catalogue.by_id("keras3-fit-perreplica")
    assert "keras-team/keras#20585" in e.meaning
    assert "TF_USE_LEGACY_KERAS=1" in e.fix and "tf_keras" in e.fix


def test_auto_shard_is_informational_with_the_policy_to_set() -> None:
    e = catalogue.by_id("auto-shard-data")
    assert e.severity == "info"
    assert "AutoShardPolicy.DATA" in e.fix
    m = e.search((DATA / "auto_shard_w0.txt").read_text())
    assert m is not None and m.group("reason").startswith("Found an unshardable source dataset")


def test_the_tasks_a_tf1_session_kept_waiting_for() -> None:
    text = (DATA / "tf1_chief_worker1_absent.txt").read_text()
    assert messages.still_waiting(text) == (["worker-1"], 32)
    assert messages.still_waiting("") == ([], 0)
