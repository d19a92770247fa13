"""gpudiag in a notebook (docs/notebook.md): ``gpudiag.watch()`` diagnoses the training a
cell runs inside the kernel's own process (watch.py), ``%load_ext gpudiag`` adds the
``%%gpudiag`` cell magic (magic.py), and the result is shown in the notebook (display.py);
kernelstate.py keeps Python's warning registries as the kernel had them.
Nothing here is imported by ``import gpudiag``: the package's ``watch`` and
``load_ipython_extension`` load it when first used."""

from gpudiag.notebook.display import Diagnosis
from gpudiag.notebook.magic import load_ipython_extension
from gpudiag.notebook.watch import Watch, watch

__all__ = ["Diagnosis", "Watch", "load_ipython_extension", "watch"]
