"""gpudiag run's hooks, loaded into the program's interpreter through PYTHONPATH.

`gpudiag run` puts this directory first on the program's PYTHONPATH. Python imports
``sitecustomize`` at start-up, finds this one, and this one:

1. installs gpudiag's hooks (gpudiag.inprogram.install.install: an import hook that waits for the
   program to import tensorflow / keras; nothing of TensorFlow is imported here);
2. finds the next ``sitecustomize`` on sys.path (the one Python would have run without
   gpudiag: a distribution's, a virtualenv's, the user's) and executes it as
   ``sitecustomize``, so it runs as before; its errors are reported by Python's site module
   exactly as without gpudiag. ``usercustomize`` is untouched (site imports it after this).

The gpudiag package loaded is the parent's own (its directory is GPUDIAG_RUN_PKG_ROOT):
that directory is put first on sys.path only while ``gpudiag`` itself is imported, then
removed, so it shadows nothing of the program's (gpudiag's submodules are found through
the package's own ``__path__``). Once the hooks are installed, the name ``gpudiag`` is
given up (the package is kept as ``sys.modules["_gpudiag_run_package"]``, a name no
program uses, and lent back to gpudiag's own imports while its hooks load:
gpudiag.inprogram.install.own_package), so a program's own module named ``gpudiag`` is the one it
imports. When done, this directory leaves the program's sys.path, and ``sitecustomize``
in sys.modules is the one Python would have run (none: this module ends with the
ImportError site.py takes for "no sitecustomize", and leaves sys.modules), so the program's sys.path
and its ``import sitecustomize`` are what they are plainly. A failure to load the hooks
never stops the program: it is reported to gpudiag on a marker line.
"""

import contextlib
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

# Copies of gpudiag.layout's names (this file runs before gpudiag is importable).
_PKG_ROOT_ENV = "GPUDIAG_RUN_PKG_ROOT"
_MARKER = "GPUDIAG-RUN hook-error "
_OWN_PACKAGE = "_gpudiag_run_package"  # gpudiag.inprogram.install.OWN_PACKAGE
_HERE = Path(__file__).resolve().parent


def _install_hooks():
    try:
        root = os.environ.get(_PKG_ROOT_ENV)
        if root and "gpudiag" not in sys.modules:
            sys.path.insert(0, root)
            try:
                import gpudiag  # noqa: F401 - fixes the package's __path__ to root
            finally:
                sys.path.remove(root)
        from gpudiag.inprogram import install

        install.install()
        if root and sys.modules.get("gpudiag") is not None:
            sys.modules[_OWN_PACKAGE] = sys.modules.pop("gpudiag")
    except Exception as exc:
        with contextlib.suppress(OSError):
            os.write(2, f"{_MARKER}{type(exc).__name__}: {exc}\n".encode())


def _not_here(path):
    try:
        return Path(path or os.curdir).resolve() != _HERE
    except (OSError, RuntimeError):
        return True


def _chain():
    sys.path[:] = [p for p in sys.path if _not_here(p)]  # the program's, as plainly
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        # Plainly there is none: site.py takes this ImportError for "no sitecustomize" and
        # says nothing; the import system drops this module from sys.modules, so the
        # program's own ``import sitecustomize`` is as plainly (the hooks stay installed)
        raise ImportError("no other sitecustomize", name="sitecustomize")
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_install_hooks()
_chain()
