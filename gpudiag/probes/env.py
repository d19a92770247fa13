"""Environment probe: what this TensorFlow build is and which devices it sees.

Command-line equivalents: ``tf.sysconfig.get_build_info()`` and
``tf.config.list_physical_devices()`` in a Python shell. Runs with TensorFlow's default device setup
(no virtual devices), so it reports what a user's own script would see.
"""

from __future__ import annotations

from typing import Any

from gpudiag.probes.devices import device_env, physical_gpu_details
from gpudiag.records.results import EnvResult


def run(config: dict[str, Any]) -> dict[str, Any]:
    import tensorflow as tf

    build = {k: (list(v) if isinstance(v, list | tuple) else v)
             for k, v in dict(tf.sysconfig.get_build_info()).items()}
    physical = [{"name": d.name, "device_type": d.device_type}
                for d in tf.config.list_physical_devices()]
    gpus = physical_gpu_details(tf)
    logical = [{"name": d.name, "device_type": d.device_type}
               for d in tf.config.list_logical_devices()]
    return EnvResult(
        tf_version=tf.__version__,
        keras_version=getattr(tf.keras, "__version__", None),
        build_info=build,
        is_built_with_cuda=bool(tf.test.is_built_with_cuda()),
        is_built_with_gpu_support=bool(tf.test.is_built_with_gpu_support()),
        physical_devices=physical,
        physical_gpus=gpus,
        logical_devices=logical,
        soft_device_placement=tf.config.get_soft_device_placement(),
        env=device_env(),
        horovod_version=installed_version("horovod"),
    ).to_dict()


def installed_version(distribution: str) -> str | None:
    """A distribution's installed version, read from its metadata without importing it."""
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None
