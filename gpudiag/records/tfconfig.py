"""TF_CONFIG: read, checked and written without TensorFlow.

TensorFlow's TFConfigClusterResolver reads the ``TF_CONFIG`` environment variable::

    {"cluster": {"chief": ["host:port"], "worker": ["host:port", ...], "ps": [...]},
     "task": {"type": "worker", "index": 1}, "rpc_layer": "grpc"}

and checks almost nothing: a bad index or a task that is not in the cluster surfaces
much later, or never (the cluster just does not form). ``parse`` checks everything
TensorFlow would trip over, before any process starts, and raises a UsageError (exit 2)
with one line naming the problem: bad JSON, no cluster or task, an unknown job name, an
empty job (a chief declared with no address), two chiefs, an address without a port or
with a port that is not a number in 1..65535, one address given twice, a task type
missing from the cluster, an index out of range, and ``localhost`` beside addresses of
other machines (each machine would dial itself). ``mode`` adds what each strategy
needs: MultiWorkerMirroredStrategy trains on ``chief``/``worker`` tasks and has no
``ps``; ParameterServerStrategy needs one ``chief`` (the coordinator), a ``ps`` and a
``worker``.

``local_cluster`` builds the TF_CONFIGs of a cluster on this machine: every address
127.0.0.1 on ports the OS said were free (``free_ports``).
"""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpudiag.errors import UsageError

ENV_VAR = "TF_CONFIG"
JOBS = ("chief", "worker", "ps", "evaluator")  # multi_worker_util's allowed task types
SYNC_JOBS = ("chief", "worker")  # the tasks MultiWorkerMirroredStrategy trains on
LOOPBACK_HOST = "127.0.0.1"
MODES = ("sync", "ps")


@dataclass(frozen=True)
class TfConfig:
    """One process's TF_CONFIG: the whole cluster and which task this process is."""

    cluster: dict[str, tuple[str, ...]]
    task_type: str
    task_index: int
    rpc_layer: str | None = None

    @property
    def task(self) -> str:
        return f"{self.task_type}-{self.task_index}"

    @property
    def address(self) -> str:
        return self.cluster[self.task_type][self.task_index]

    @property
    def addresses(self) -> list[str]:
        return [a for addresses in self.cluster.values() for a in addresses]

    @property
    def training_tasks(self) -> list[tuple[str, int]]:
        """The (type, index) of the tasks that train under MultiWorkerMirroredStrategy,
        chief first: the order of their replica ids."""
        return [(job, i) for job in SYNC_JOBS for i in range(len(self.cluster.get(job, ())))]

    @property
    def coordination_leader(self) -> str:
        """The task TensorFlow's coordination service runs on (coordination_leader_of)."""
        return coordination_leader_of(self.cluster) or self.task

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"cluster": {k: list(v) for k, v in self.cluster.items()},
                                "task": {"type": self.task_type, "index": self.task_index}}
        if self.rpc_layer:
            data["rpc_layer"] = self.rpc_layer
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))


def coordination_leader_of(cluster: Mapping[str, Sequence[str]]) -> str | None:
    """The task TensorFlow's coordination service runs on (multi_worker_util's
    coordination_leader): the chief if there is one, else worker 0, else ps 0."""
    for job in ("chief", "worker", "ps"):
        if cluster.get(job):
            return f"{job}-0"
    return None


def _fail(message: str) -> UsageError:
    return UsageError(f"TF_CONFIG: {message}")


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_loopback_address(address: str) -> bool:
    """``127.0.0.1:2222``, ``localhost:2222``, ``[::1]:2222``: this machine only."""
    return _is_loopback(address.rpartition(":")[0])


def split_address(address: str, where: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:port`` for IPv6) -> (host, port); UsageError naming ``where``."""
    if not isinstance(address, str) or not address.strip():
        raise _fail(f"{where} is {address!r}, not a \"host:port\" string")
    host, sep, port_text = address.strip().rpartition(":")
    if not sep or not host:
        raise _fail(f"{where} {address!r} has no port (write host:port)")
    if not port_text.isdigit():
        raise _fail(f"{where} {address!r}: the port {port_text!r} is not a number")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise _fail(f"{where} {address!r}: the port {port} is outside 1..65535")
    return host, port


def _cluster(value: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, Mapping) or not value:
        raise _fail("\"cluster\" must be an object of jobs, e.g. "
                    "{\"worker\": [\"host1:2222\", \"host2:2222\"]}")
    cluster: dict[str, tuple[str, ...]] = {}
    seen: dict[str, str] = {}
    for job, addresses in value.items():
        if job not in JOBS:
            raise _fail(f"unknown job {job!r} in cluster (allowed: {', '.join(JOBS)})")
        if not isinstance(addresses, list):
            raise _fail(f"cluster.{job} must be a list of \"host:port\" addresses")
        if not addresses:
            raise _fail(f"cluster.{job} is declared but empty: give its address or "
                        f"remove the {job} job")
        for i, address in enumerate(addresses):
            where = f"cluster.{job}[{i}]"
            split_address(address, where)
            if address in seen:
                raise _fail(f"{where} {address!r} is also {seen[address]}: two tasks "
                            "cannot listen on one address")
            seen[address] = where
        cluster[job] = tuple(addresses)
    if len(cluster.get("chief", ())) > 1:
        raise _fail(f"cluster.chief has {len(cluster['chief'])} addresses; there is at "
                    "most one chief")
    _check_hosts(cluster)
    return cluster


def _check_hosts(cluster: Mapping[str, Sequence[str]]) -> None:
    """``localhost`` works only when every task is on this one machine."""
    loopback: list[str] = []
    remote: list[str] = []
    for job, addresses in cluster.items():
        for i, address in enumerate(addresses):
            host = address.rpartition(":")[0]
            (loopback if _is_loopback(host) else remote).append(f"cluster.{job}[{i}] {address}")
    if loopback and remote:
        raise _fail(f"{loopback[0]} is a loopback address but {remote[0]} is another "
                    "machine: every machine would dial itself there; give each task the "
                    "address the other machines reach it at")


def _index(value: Any) -> int:
    if isinstance(value, bool):
        raise _fail(f"task.index {value!r} is not a number")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)  # TensorFlow accepts int("1") too
    raise _fail(f"task.index {value!r} is not a number")


def parse(text: str | None, *, mode: str | None = None) -> TfConfig:
    """Check a TF_CONFIG value; UsageError with one line naming the first problem."""
    if text is None or not text.strip():
        raise UsageError(f"{ENV_VAR} is not set: each process of a cluster needs it "
                         "(or use --slurm inside a Slurm allocation)")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(f"not valid JSON ({exc.msg} at line {exc.lineno} column "
                    f"{exc.colno})") from None
    if not isinstance(data, Mapping):
        raise _fail("must be a JSON object with \"cluster\" and \"task\"")
    if "cluster" not in data:
        raise _fail("has no \"cluster\": list every task's host:port by job")
    cluster = _cluster(data["cluster"])
    task = data.get("task")
    if task is None:
        raise _fail("has no \"task\": each process needs {\"type\": ..., \"index\": ...}")
    if not isinstance(task, Mapping):
        raise _fail("\"task\" must be an object {\"type\": ..., \"index\": ...}")
    if "type" not in task:
        raise _fail("task has no \"type\" (chief, worker or ps)")
    if "index" not in task:
        raise _fail("task has no \"index\"")
    task_type, index = task["type"], _index(task["index"])
    if task_type not in cluster:
        raise _fail(f"task.type {task_type!r} is not a job of the cluster (jobs: "
                    f"{', '.join(cluster)})")
    n = len(cluster[task_type])
    if not 0 <= index < n:
        raise _fail(f"task.index {index} is out of range: cluster.{task_type} has {n} "
                    f"task{'s' if n != 1 else ''} (index 0..{n - 1})")
    rpc_layer = data.get("rpc_layer")
    if rpc_layer is not None and not isinstance(rpc_layer, str):
        raise _fail(f"rpc_layer {rpc_layer!r} is not a string")
    config = TfConfig(cluster, str(task_type), index, rpc_layer)
    if mode is not None:
        check_mode(config, mode)
    return config


def check_mode(config: TfConfig, mode: str) -> None:
    """What each strategy needs of the cluster."""
    jobs = config.cluster
    if mode == "sync":
        if "ps" in jobs:
            raise _fail("the cluster has ps tasks, which MultiWorkerMirroredStrategy does "
                        "not use; run with --mode ps, or remove them")
        if config.task_type not in SYNC_JOBS:
            raise _fail(f"task.type {config.task_type!r} does not train under "
                        "MultiWorkerMirroredStrategy (chief or worker)")
    elif mode == "ps":
        for job, what in (("chief", "the coordinator"), ("ps", "a parameter server"),
                          ("worker", "a worker")):
            if not jobs.get(job):
                raise _fail(f"--mode ps needs {what}: the cluster has no {job} job")
    else:
        raise UsageError(f"--mode {mode!r} is not one of: {', '.join(MODES)}")


def free_ports(n: int, host: str = LOOPBACK_HOST) -> list[int]:
    """``n`` distinct TCP ports the OS reports free on ``host`` (bound, then released)."""
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def local_cluster(mode: str, n_workers: int, n_ps: int,
                  ports: Sequence[int] | None = None) -> dict[str, tuple[str, ...]]:
    """A cluster on this machine, every address on loopback: sync is ``worker`` tasks
    only (worker 0 is the chief); ps adds a ``chief`` (the coordinator) and ``ps``."""
    jobs = {"worker": n_workers} if mode == "sync" else {"chief": 1, "ps": n_ps,
                                                         "worker": n_workers}
    total = sum(jobs.values())
    ports = list(ports) if ports is not None else free_ports(total)
    if len(ports) != total:
        raise ValueError(f"{total} ports needed, {len(ports)} given")
    cluster: dict[str, tuple[str, ...]] = {}
    it = iter(ports)
    for job, count in jobs.items():
        cluster[job] = tuple(f"{LOOPBACK_HOST}:{next(it)}" for _ in range(count))
    return cluster


def tasks_of(cluster: Mapping[str, Sequence[str]]) -> list[TfConfig]:
    """One TfConfig per task of ``cluster``, in job order."""
    plain = {k: tuple(v) for k, v in cluster.items()}
    return [TfConfig(plain, job, i) for job, addresses in plain.items()
            for i in range(len(addresses))]
