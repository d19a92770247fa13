# ruff: noqa: UP031, UP036, PTH100, PTH120, SIM105, B904 - Python 2 syntax until the version is known
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

import os
import sys

# Copies of gpudiag.layout's names (this file runs before gpudiag is importable).
_PKG_ROOT_ENV = "GPUDIAG_RUN_PKG_ROOT"
_MARKER = "GPUDIAG-RUN hook-error "
_OWN_PACKAGE = "_gpudiag_run_package"  # gpudiag.inprogram.install.OWN_PACKAGE
# gpudiag's own code needs this (pyproject's requires-python): an older interpreter the
# program starts (python2.7, python3.8 of another environment) runs without the hooks,
# its own sitecustomize chained as plainly, nothing printed (gpudiag.run.processes names
# it). So this file stays Python 2 syntax until the version is known.
_NEEDS = (3, 11)


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
        try:
            os.write(2, ("%s%s: %s\n" % (_MARKER, type(exc).__name__, exc)).encode())
        except OSError:
            pass


def _not_here(path, here):
    try:
        return os.path.realpath(os.path.abspath(path or os.curdir)) != here
    except (OSError, ValueError):
        return True


def _none():
    """Plainly there is no other sitecustomize: site.py takes this ImportError for "no
    sitecustomize" and says nothing; the import system drops this module from
    sys.modules, so the program's own ``import sitecustomize`` is as plainly (the hooks
    stay installed)."""
    if sys.version_info[0] < 3:
        return ImportError("no other sitecustomize")
    return ImportError("no other sitecustomize", name="sitecustomize")


def _chain():
    here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:] = [p for p in sys.path if _not_here(p, here)]  # the program's, as plainly
    if sys.version_info[0] < 3:
        _chain_python2()
        return
    import importlib.machinery
    import importlib.util

    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        raise _none()
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _chain_python2():
    import imp

    try:
        found, path, _ = imp.find_module("sitecustomize", sys.path)
    except ImportError:
        raise _none()
    if found is None:  # a package or a compiled module: not chained
        raise _none()
    with found:
        code = compile(found.read(), path, "exec")
    module = imp.new_module("sitecustomize")
    module.__file__ = path
    sys.modules["sitecustomize"] = module
    exec(code, module.__dict__)


if sys.version_info >= _NEEDS:
    _install_hooks()
_chain()
