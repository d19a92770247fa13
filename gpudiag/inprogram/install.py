"""The one installer of the hooks (called by hooks/sitecustomize.py in the program's
interpreter).

``install()`` reads the configuration from the environment, records the process, and
installs the import hook, the crash hooks and the exit handler. When the program imports
tensorflow, keras or tf_keras, the import hook calls back here and the hooks for that
module are installed, each through ``guard``. ``install_here()`` installs the same hooks in
a process already running (a notebook's kernel: gpudiag.notebook) and ``uninstall()`` takes
them all out again (every patched attribute back: agent.unpatch_all). Only this module
imports the hook modules; they import agent.py's primitives, never this module, so there
is no cycle.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import faulthandler
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from gpudiag.inprogram import agent as agent_mod
from gpudiag.inprogram.agent import RECORDED_ENV, Agent, guard
from gpudiag.inprogram.config import RunHookConfig
from gpudiag.layout import events

#: The modules whose import the hooks wait for.
WATCHED = ("tensorflow", "keras", "tf_keras")


def install() -> Agent | None:
    """Set up the hooks in this process (no-op without a configuration)."""
    if agent_mod.AGENT is not None:
        return agent_mod.AGENT
    config = RunHookConfig.from_env()
    if config is None:
        return None
    agent = agent_mod.AGENT = Agent(config)
    agent.emit(events.Process(ppid=os.getppid(), argv=list(sys.argv), executable=sys.executable,
               python=sys.version.split()[0], cwd=str(Path.cwd()),
               env={k: os.environ.get(k) for k in RECORDED_ENV}))
    from gpudiag.inprogram import cpplevel, crash, importhook

    crash.install(agent)
    atexit.register(_at_exit, agent)
    importhook.install({name: _on_import(agent, name)
                        for name in WATCHED}, agent.hook_error,
                       before={"tensorflow": lambda: cpplevel.before_tensorflow(agent)})
    return agent


@dataclasses.dataclass
class InKernel:
    """The hooks installed by :func:`install_here` in a process gpudiag did not start (a
    notebook's kernel), with what :func:`uninstall` needs to leave it as it was."""

    agent: Agent
    finder: Any  # importhook.PostImportFinder on sys.meta_path, or None
    listeners: list[Callable[[object, int], None]]  # recorder.STEP_LISTENERS before
    faulthandler_was_enabled: bool


#: Held while hooks go in or come out in a running process (gpudiag.notebook): two
#: threads entering watch() at once never both install.
INSTALLING = threading.Lock()


def install_here(config: RunHookConfig) -> InKernel:
    """The same hooks as :func:`install`, in this running process (gpudiag.notebook):
    no exit handler (the process goes on), and the modules already imported (a notebook
    imports TensorFlow in an earlier cell) get their hooks at once. Raises (nothing
    installed then) when the events directory cannot be written or the hooks are already
    installed in this process (a watch inside a watch, another thread's watch, a kernel
    under `gpudiag run`)."""
    with INSTALLING:
        return _install_here(config)


def _install_here(config: RunHookConfig) -> InKernel:
    from gpudiag.inprogram import importhook, recorder

    if agent_mod.AGENT is not None:
        raise RuntimeError("gpudiag's hooks are already installed in this process")
    agent = Agent(config)
    agent.recorder._descriptor()  # the events file can be written, or nothing starts
    agent_mod.AGENT = agent
    state = InKernel(agent, None, list(recorder.STEP_LISTENERS), faulthandler.is_enabled())
    agent.emit(events.Process(ppid=os.getppid(), argv=list(sys.argv), executable=sys.executable,
               python=sys.version.split()[0], cwd=str(Path.cwd()),
               env={k: os.environ.get(k) for k in RECORDED_ENV}))
    from gpudiag.inprogram import crash

    guard("crash hooks", crash.install, agent)
    # no `before` for tensorflow: its C++ log goes to the kernel's own stderr, as plainly
    state.finder = importhook.install({name: _on_import(agent, name) for name in WATCHED},
                                      agent.hook_error)
    return state


def uninstall(state: InKernel) -> list[str]:
    """Undo :func:`install_here`: the exit callbacks run (the profiler window stopped, the
    last steps and the devices recorded, the ``exit`` event), every patched attribute put
    back (agent.unpatch_all), the import hook off sys.meta_path, gpudiag's threads ended,
    the events file closed. Never raises; returns what could not be put back (by name)."""
    with INSTALLING:
        return _uninstall(state)


def _uninstall(state: InKernel) -> list[str]:
    from gpudiag.inprogram import placementwindow, recorder, stallwatch, tfhooks

    agent = state.agent
    left: list[str] = []
    guard("at the end of the watch", agent._at_exit)
    recorder.stop_flushers()
    with contextlib.suppress(ValueError):
        if state.finder is not None:
            sys.meta_path.remove(state.finder)
    left.extend(agent_mod.unpatch_all())
    recorder.STEP_LISTENERS[:] = state.listeners
    if stallwatch.WATCH is not None:
        stallwatch.WATCH.stop()
    stallwatch.WATCH = None
    placementwindow.WINDOW = None
    tfhooks.HOOKS = None
    if not state.faulthandler_was_enabled and agent.fault_file is not None:
        faulthandler.disable()
        with contextlib.suppress(Exception):
            agent.fault_file.close()
    agent.recorder.close()
    agent_mod.AGENT = None
    return left


#: gpudiag's package in the program's sys.modules (hooks/sitecustomize.py gives up the
#: name ``gpudiag``, so that a program's own module named gpudiag is the one it imports).
OWN_PACKAGE = "_gpudiag_run_package"


@contextlib.contextmanager
def own_package() -> Iterator[None]:
    """While gpudiag's hooks load: ``gpudiag`` is gpudiag's package again (its modules
    import their siblings by that name); then whatever the program had (its own, or none)."""
    own = sys.modules.get(OWN_PACKAGE)
    if own is None:
        yield
        return
    had = sys.modules.get("gpudiag")
    sys.modules["gpudiag"] = own
    try:
        yield
    finally:
        if had is None:
            sys.modules.pop("gpudiag", None)
        else:
            sys.modules["gpudiag"] = had


def _at_exit(agent: Agent) -> None:
    with own_package():
        agent._at_exit()
    from gpudiag.inprogram import trial

    trial.end_after_exit(agent.crash_recorded)  # a `gpudiag try` trial stopped early


def _on_import(agent: Agent, name: str) -> Callable[[ModuleType], None]:
    def callback(module: ModuleType) -> None:
        with own_package():
            if name == "tensorflow":
                install_tensorflow(agent, module)
            else:
                from gpudiag.inprogram import kerascalls, kerashooks

                kerashooks.install(agent, module)
                guard("Keras call timing", kerascalls.install, agent, module)
    return callback


def install_tensorflow(agent: Agent, tf: ModuleType) -> None:
    """After the program's ``import tensorflow``: tf.config hooks first, then the rest."""
    from gpudiag.inprogram import (
        crash,
        datasets,
        devicescopes,
        eagersteps,
        functions,
        hostreads,
        inputwait,
        logcapture,
        profilewindow,
        pywarnings,
        sessions,
        stallwatch,
        strategies,
        tf1dist,
        tfhooks,
    )

    hooks = tfhooks.start(agent, tf)
    guard("faulthandler", crash.enable_faulthandler, agent)
    guard("tf.config hooks", hooks.patch_config)
    guard("log capture", logcapture.install, agent)
    guard("warnings capture", pywarnings.install, agent)
    guard("tf.device hook", devicescopes.install, agent, tf)
    agent.profile = guard("profiler window", profilewindow.ProfileWindow, agent, tf)
    guard("strategy hooks", strategies.install, agent, tf)
    guard("cluster hooks", strategies.install_cluster, agent, tf)
    guard("tf.compat.v1 distribution hooks", tf1dist.install, agent, tf)
    guard("tf.function hooks", functions.install, agent, tf)
    guard("Session hooks", sessions.install, agent, tf)
    guard("tf.data hooks", datasets.install, agent, tf)
    guard("eager step hooks", eagersteps.install, agent, tf)
    guard("tensor read hooks", hostreads.install, agent, tf)
    guard("input wait hooks", inputwait.install, agent)
    guard("stall watch", stallwatch.install, agent)
    agent.on_exit(lambda: hooks.record_devices("exit"))
