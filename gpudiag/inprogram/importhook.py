"""An import hook that runs a callback right after the program imports a module.

A meta path finder placed first on ``sys.meta_path`` answers only for the watched names
(tensorflow, keras, tf_keras): it asks the other finders for the real spec and wraps that
spec's loader's ``exec_module``, so the callback runs once the module has executed
completely, exactly when the program imported it, never earlier. A name may also have a
``before`` call, made as the module starts executing; what it returns is called once the
module and its callback are done (or the import failed): gpudiag.inprogram.cpplevel
lends TensorFlow's import the C++ log level gpudiag needs and gives the program its own
back. gpudiag imports none of these modules itself.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from gpudiag.inprogram.agent import drop_own_frames, patch

Callback = Callable[[ModuleType], None]
Before = Callable[[], Callable[[], None] | None]


class PostImportFinder(importlib.abc.MetaPathFinder):
    def __init__(self, callbacks: dict[str, Callback],
                 on_error: Callable[[str, BaseException], None],
                 before: dict[str, Before] | None = None) -> None:
        self.callbacks = dict(callbacks)
        self.on_error = on_error
        self.before = dict(before or {})
        self._busy: set[str] = set()

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        callback = self.callbacks.get(fullname)
        if callback is None or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        # Not removed here: a spec may be found only to check that the module exists
        # (importlib.util.find_spec); the callback goes once the module really executes.
        self._wrap(spec.loader, fullname, callback)
        return spec

    def _wrap(self, loader: Any, name: str, callback: Callback) -> None:
        original = loader.exec_module
        on_error = self.on_error
        callbacks = self.callbacks
        befores = self.before

        def exec_module(module: ModuleType) -> None:
            before, after = befores.pop(name, None), None
            if before is not None:
                try:
                    after = before()
                except Exception as exc:
                    on_error(f"before import {name}", exc)
            try:
                try:
                    original(module)  # the program's import; its exceptions are its own
                except BaseException as exc:  # its traceback as plainly
                    drop_own_frames(exc)
                    raise
                if callbacks.pop(name, None) is None:
                    return  # already called for this module
                try:
                    callback(module)
                except Exception as exc:
                    on_error(f"after import {name}", exc)
            finally:
                if after is not None:
                    try:
                        after()
                    except Exception as exc:
                        on_error(f"after import {name}", exc)

        patch(loader, "exec_module", exec_module)


def install(callbacks: dict[str, Callback],
            on_error: Callable[[str, BaseException], None],
            before: dict[str, Before] | None = None) -> PostImportFinder | None:
    """Watch ``callbacks``' modules; a module already imported gets its callback now (and
    no ``before`` call: it is too late for one)."""
    pending = {}
    for name, cb in callbacks.items():
        module = sys.modules.get(name)
        if module is not None:
            try:
                cb(module)
            except Exception as exc:
                on_error(f"after import {name}", exc)
        else:
            pending[name] = cb
    if not pending:
        return None
    finder = PostImportFinder(pending, on_error,
                              {k: v for k, v in (before or {}).items() if k in pending})
    sys.meta_path.insert(0, finder)
    return finder
