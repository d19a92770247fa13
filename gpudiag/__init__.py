"""gpudiag: is TensorFlow really using my GPUs, and if not, why?"""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``gpudiag.watch`` and ``gpudiag.load_ipython_extension`` (``%load_ext gpudiag``),
    loaded when first used (gpudiag.notebook): ``import gpudiag`` stays light."""
    if name in ("watch", "load_ipython_extension"):
        from gpudiag import notebook

        return getattr(notebook, name)
    raise AttributeError(f"module 'gpudiag' has no attribute {name!r}")
