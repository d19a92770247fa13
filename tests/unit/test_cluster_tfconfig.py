"""TF_CONFIG checked before anything starts: pure cases, then the real CLI (exit 2, one
line, nothing written), and the cluster modules stay TF-free."""

from __future__ import annotations

import json
import socket

import pytest

from gpudiag.errors import UsageError
from gpudiag.records import tfconfig

TWO = {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]}


def cfg(cluster: object = TWO, task: object = None, **extra: object) -> str:
    data: dict[str, object] = {"cluster": cluster, **extra}
    data["task"] = {"type": "worker", "index": 1} if task is None else task
    return json.dumps(data)


def test_a_good_tf_config_is_read_as_tensorflow_reads_it() -> None:
    tfc = tfconfig.parse(cfg(task={"type": "worker", "index": "1"}, rpc_layer="grpc"))
    assert tfc.cluster == {"worker": ("10.0.0.1:2222", "10.0.0.2:2222")}
    assert (tfc.task_type, tfc.task_index, tfc.task, tfc.address) == (
        "worker", 1, "worker-1", "10.0.0.2:2222")
    assert tfc.rpc_layer == "grpc"
    assert tfc.coordination_leader == "worker-0"
    assert tfconfig.parse(tfc.to_json()) == tfc


def test_the_chief_leads_and_trains_first() -> None:
    tfc = tfconfig.parse(cfg({"chief": ["c:1"], "worker": ["w0:1", "w1:1"]},
                             {"type": "chief", "index": 0}), mode="sync")
    assert tfc.coordination_leader == "chief-0"
    assert tfc.training_tasks == [("chief", 0), ("worker", 0), ("worker", 1)]


@pytest.mark.parametrize(("text", "needle"), [
    (None, "TF_CONFIG is not set"),
    ("  ", "TF_CONFIG is not set"),
    ("{'cluster': 1}", "not valid JSON"),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}',
     "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    (json.dumps({"task": {"type": "worker", "index": 0}}), "has no \"cluster\""),
    (json.dumps({"cluster": {}, "task": {"type": "worker", "index": 0}}), "\"cluster\" must be"),
    (cfg(task={}), "has no \"type\""),
    (json.dumps({"cluster": TWO}), "has no \"task\""),
    (cfg(task=[1]), "\"task\" must be an object"),
    (cfg(task={"type": "worker"}), "task has no \"index\""),
    (cfg(task={"type": "worker", "index": 2}), "task.index 2 is out of range: cluster.worker "
     "has 2 tasks (index 0..1)"),
    (cfg(task={"type": "worker", "index": -1}), "task.index -1 is out of range"),
    (cfg(task={"type": "worker", "index": True}), "task.index True is not a number"),
    (cfg(task={"type": "worker", "index": "one"}), "task.index 'one' is not a number"),
    (cfg({"worker": ["10.0.0.1:2222", "10.0.0.2:http"]}), "cluster.worker[1] "
     "'10.0.0.2:http': the port 'http' is not a number"),
    (cfg({"worker": ["10.0.0.1:2222", "10.0.0.2"]}), "cluster.worker[1] '10.0.0.2' has no port"),
    (cfg({"worker": ["10.0.0.1:2222", "10.0.0.2:70000"]}), "outside 1..65535"),
    (cfg({"worker": ["10.0.0.1:2222", 7]}), "cluster.worker[1] is 7"),
    (cfg({"worker": "10.0.0.1:2222"}), "cluster.worker must be a list"),
    (cfg({"workers": ["10.0.0.1:2222"]}), "unknown job 'workers'"),
    (cfg({"chief": [], "worker": ["10.0.0.1:2222", "10.0.0.2:2222"]}),
     "cluster.chief is declared but empty"),
    (cfg({"chief": ["a:1", "b:1"], "worker": ["10.0.0.1:2222", "10.0.0.2:2222"]}),
     "at most one chief"),
    (cfg(TWO, {"type": "chief", "index": 0}), "task.type 'chief' is not a job of the cluster"),
    (cfg({"worker": ["10.0.0.1:2222", "10.0.0.1:2222"]}), "is also cluster.worker[0]"),
    (cfg({"worker": ["localhost:2222", "10.0.0.2:2222"]}), "cluster.worker[0] localhost:2222 "
     "is a loopback address but cluster.worker[1] 10.0.0.2:2222 is another machine"),
    (cfg(TWO, rpc_layer=3), "rpc_layer 3 is not a string"),
])
def test_every_malformed_tf_config_is_one_line_naming_the_problem(text: str | None,
                                                                  needle: str) -> None:
    with pytest.raises(UsageError) as err:
        tfconfig.parse(text)
    message = err.value.message
    assert needle in message and "\n" not in message, message


@pytest.mark.parametrize(("cluster", "task", "mode", "needle"), [
    ({"ps": ["p:1"], "worker": ["w:1"]}, {"type": "worker", "index": 0}, "sync",
     "ps tasks, which MultiWorkerMirroredStrategy does not use"),
    ({"chief": ["c:1"], "worker": ["w:1"]}, {"type": "chief", "index": 0}, "ps",
     "--mode ps needs a parameter server: the cluster has no ps job"),
    ({"ps": ["p:1"], "worker": ["w:1"]}, {"type": "ps", "index": 0}, "ps",
     "--mode ps needs the coordinator: the cluster has no chief job"),
    ({"evaluator": ["e:1"], "worker": ["w:1"]}, {"type": "evaluator", "index": 0}, "sync",
     "does not train under MultiWorkerMirroredStrategy"),
])
def test_what_each_strategy_needs(cluster: dict, task: dict, mode: str, needle: str) -> None:
    with pytest.raises(UsageError) as err:
        tfconfig.parse(cfg(cluster, task), mode=mode)
    assert needle in err.value.message


def test_a_local_cluster_is_loopback_on_ports_that_were_free() -> None:
    sync = tfconfig.local_cluster("sync", 2, 1)
    assert list(sync) == ["worker"] and len(sync["worker"]) == 2
    ps = tfconfig.local_cluster("ps", 2, 1)
    assert {k: len(v) for k, v in ps.items()} == {"chief": 1, "ps": 1, "worker": 2}
    addresses = [a for v in ps.values() for a in v]
    assert len(set(addresses)) == 4
    for address in addresses:
        host, port = tfconfig.split_address(address, "x")
        assert host == "127.0.0.1"
        with socket.socket() as s:  # the port is free again: binding it works
            s.bind((host, port))
    tasks = tfconfig.tasks_of(ps)
    assert [t.task for t in tasks] == ["chief-0", "ps-0", "worker-0", "worker-1"]
    for t in tasks:
        assert tfconfig.parse(t.to_json(), mode="ps") == t
