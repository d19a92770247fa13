"""On-disk names of multi-worker clusters (gpudiag/cluster/); part of gpudiag.layout."""

from __future__ import annotations

import re

from gpudiag.layout.names import Indexed

# ===================================================== multi-worker clusters (cluster/)
# `gpudiag scaling --workers N` and `gpudiag worker`. A scaling run with workers holds,
# per cluster configuration (``cluster_config_name``: mode, worker count, batch per
# worker), one directory ``<config>/`` with one TensorBoard run per task
# (``<config>/<task>/``, ``task_name``: ``worker-0``, ``ps-0``, ``chief-0``) written by
# that task's child, its resume checkpoints under ``<config>/<BACKUP_DIR>/<task>/``, and
# the children's files under ``children/<task_child_name(...)>/``. The parent writes
# the CLUSTER_TB_RUN run: total examples/s against the worker count per mode and batch,
# and the table (TAG_CLUSTER_TABLE). `gpudiag worker` writes ``<task>/`` and, on the
# chief, the combined per-worker scalars (``worker_examples_per_s_tag``).
#
# A cluster task prints ``GPUDIAG-CLUSTER <event> <detail>`` lines on stdout
# (``cluster_line``): ``formed <task>`` once its strategy (or server) is up,
# ``resumed <step>`` after restoring a backup; plus the GPUDIAG-STEP lines above.

CLUSTER_TB_RUN = "cluster"
BACKUP_DIR = "backup"
WORKER_BACKUP_DIR = "worker-backup"  # `gpudiag worker`: <logdir>/worker-backup/<task>/, kept
# across runs (unlike run directories) so that a restarted task resumes; removed when
# a run completes
TAG_CLUSTER_TABLE = "gpudiag/cluster"
TAG_CLUSTER_TOTAL_EXAMPLES_PER_S = "workers/examples_per_s_total"  # chief: summed
CLUSTER_MARKER = "GPUDIAG-CLUSTER"
CLUSTER_FORMED = "formed"
CLUSTER_RESUMED = "resumed"
_CLUSTER_LINE = re.compile(rf"^{CLUSTER_MARKER} (\w+) ?(.*)$")


def cluster_config_name(mode: str, n_workers: int, batch_per_worker: int) -> str:
    """``sync-2w-b32``: one cluster configuration's directory and children's prefix."""
    return f"{mode}-{n_workers}w-b{batch_per_worker}"


def task_name(task_type: str, index: int) -> str:
    """``worker-1``: one task of a cluster (its TensorBoard run inside the config dir)."""
    return f"{task_type}-{index}"


def task_child_name(config: str, task: str, attempt: int = 0) -> str:
    """``sync-2w-b32-worker-1`` (``...-restart1`` for a restarted attempt): a task's
    children/ entry."""
    return f"{config}-{task}" + (f"-restart{attempt}" if attempt else "")


def cluster_examples_per_s_tag(mode: str, batch_per_worker: int) -> str:
    """cluster/ run, step = worker count: examples/s summed over the workers."""
    return f"cluster/{mode}-b{batch_per_worker}/examples_per_s"


def cluster_step_s_tag(mode: str, batch_per_worker: int) -> str:
    """cluster/ run, step = worker count: the median step time of the slowest worker."""
    return f"cluster/{mode}-b{batch_per_worker}/step_s"


#: Scalar on the chief's run, step = the last step: worker <i>'s own examples/s.
worker_examples_per_s_tag = Indexed("workers/examples_per_s_{}")


def cluster_line(event: str, detail: str = "") -> str:
    """The line a cluster task prints for ``event`` (CLUSTER_FORMED, CLUSTER_RESUMED)."""
    return f"{CLUSTER_MARKER} {event} {detail}".rstrip()


def parse_cluster_line(line: str) -> tuple[str, str] | None:
    """``cluster_line``'s output back as (event, detail); None for any other line."""
    m = _CLUSTER_LINE.match(line.strip())
    return (m.group(1), m.group(2)) if m else None
