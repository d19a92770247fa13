"""The one installer of the hooks (called by hooks/sitecustomize.py in the program's
interpreter).

``install()`` reads the configuration from the environment, records the process, and
installs the import hook, the crash hooks and the exit handler. When the program imports
tensorflow, keras or tf_keras, the import hook calls back here and the hooks for that
module are installed, each through ``guard``. Only this module imports the hook modules;
they import agent.py's primitives, never this module, so there is no cycle.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

from gpudiag.inprogram import agent as agent_mod
from gpudiag.inprogram.agent import RECORDED_ENV, Agent, guard
from gpudiag.inprogram.config import RunHookConfig
from gpudiag.layout import events


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
                        for name in ("tensorflow", "keras", "tf_keras")}, agent.hook_error,
                       before={"tensorflow": lambda: cpplevel.before_tensorflow(agent)})
    return agent


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


def _on_import(agent: Agent, name: str) -> Callable[[ModuleType], None]:
    def callback(module: ModuleType) -> None:
        with own_package():
            if name == "tensorflow":
                install_tensorflow(agent, module)
            else:
                from gpudiag.inprogram import kerashooks

                kerashooks.install(agent, module)
    return callback


def install_tensorflow(agent: Agent, tf: ModuleType) -> None:
    """After the program's ``import tensorflow``: tf.config hooks first, then the rest."""
    from gpudiag.inprogram import (
        crash,
        datasets,
        devicescopes,
        eagersteps,
        functions,
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
    guard("input wait hooks", inputwait.install)
    guard("stall watch", stallwatch.install, agent)
    agent.on_exit(lambda: hooks.record_devices("exit"))
