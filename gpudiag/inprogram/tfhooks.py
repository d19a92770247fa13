"""What the hooks do once the program has imported tensorflow.

Right after ``import tensorflow`` finishes (before the program's next line, and before
any device is initialised unless the import itself did it):

- record TensorFlow's version and the TF_CPP_MIN_LOG_LEVEL it started with: if the
  program set it above 0 itself, TensorFlow's C++ log (the placement log, CUDA and NCCL
  messages) is gone and the parent says so;
- prepare the placement window (gpudiag.inprogram.placementwindow: TensorFlow's own placement
  decisions from its run metadata, gathered while the context initialises and over the
  first steps of each loop, nothing per op afterwards);
- wrap the tf.config setters (visible devices, memory growth, logical devices, soft
  placement ...) and the global seed's (tf.random.set_seed): each call is recorded in
  order with its arguments, where it was made and the error it raised (a configuration
  attempted after initialisation), then returned or re-raised unchanged;
- (install.py then installs the other hooks: strategies, step functions, Sessions,
  Python log capture, the profiler window, faulthandler.)

The devices (physical and logical) are recorded once TensorFlow has initialised them for
the program (when a strategy, a Session, a fit or a step function first runs, or at exit),
never earlier: listing devices earlier would initialise them in the program's place.
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpudiag.inprogram.agent import caller_frame, wrap_once
from gpudiag.inprogram.usercode import own_frame
from gpudiag.layout import RUN_MARK_PLACEMENT_ASKED, events

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent

# (module path under tf, function names) of the configuration calls that are recorded.
CONFIG_APIS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("config", ("set_visible_devices", "set_logical_device_configuration",
                "set_soft_device_placement", "experimental_connect_to_cluster",
                "experimental_connect_to_host")),
    ("config.experimental", ("set_memory_growth", "set_visible_devices",
                             "set_virtual_device_configuration", "set_synchronous_execution",
                             "set_device_policy", "enable_tensor_float_32_execution",
                             "enable_op_determinism")),
    ("config.threading", ("set_inter_op_parallelism_threads",
                          "set_intra_op_parallelism_threads")),
    ("config.optimizer", ("set_jit", "set_experimental_options")),
    ("debugging", ("set_log_device_placement",)),
    # the global seed (keras.utils.set_random_seed and tf_keras's call tf.random.set_seed,
    # through tf.random and tf.compat.v2.random): `gpudiag diff` knows whether two runs of
    # a program start from the same weights
    ("random", ("set_seed",)),
    ("compat.v2.random", ("set_seed",)),
    ("compat.v1.random", ("set_random_seed",)),
    ("compat.v1", ("disable_eager_execution", "enable_eager_execution", "disable_v2_behavior",
                   "set_random_seed")),
    ("compat.v1.config", ("set_visible_devices", "set_logical_device_configuration",
                          "set_soft_device_placement")),
    ("compat.v1.config.experimental", ("set_memory_growth", "set_visible_devices",
                                       "set_virtual_device_configuration")),
)
MAX_ARG_CHARS = 300
# (module path under tf, function name, what it sets: None for its first argument) of the
# debugging switches that slow every step while they are on (events.DebugMode).
DEBUG_APIS: tuple[tuple[str, str, bool | None], ...] = (
    ("config", "run_functions_eagerly", None),
    ("config", "experimental_run_functions_eagerly", None),
    ("data.experimental", "enable_debug_mode", True),
    ("debugging", "enable_check_numerics", True),
    ("debugging", "disable_check_numerics", False),
)


def _resolve(tf: ModuleType, path: str) -> Any:
    obj: Any = tf
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def describe(value: Any) -> Any:
    """A configuration argument as plain data: devices by name, configurations as dicts."""
    if isinstance(value, list | tuple):
        return [describe(v) for v in value]
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    name = getattr(value, "name", None)
    if type(value).__name__ in ("PhysicalDevice", "LogicalDevice") and isinstance(name, str):
        return name
    if type(value).__name__ == "LogicalDeviceConfiguration":
        return {"memory_limit_mb": getattr(value, "memory_limit", None),
                "experimental_priority": getattr(value, "experimental_priority", None),
                "experimental_device_ordinal": getattr(value, "experimental_device_ordinal",
                                                       None)}
    return repr(value)[:MAX_ARG_CHARS]


def caller() -> dict[str, Any] | None:
    """The innermost frame of the program's own code on the current stack."""
    frame = own_frame(caller_frame(1))
    if frame is None:
        return None
    return {"file": frame.f_code.co_filename, "line": frame.f_lineno,
            "function": frame.f_code.co_name}


def context_initialized() -> bool:
    from tensorflow.python.eager import context

    ctx = context.context_safe()
    return ctx is not None and getattr(ctx, "_context_handle", None) is not None


class TfHooks:
    def __init__(self, agent: Agent, tf: ModuleType) -> None:
        self.agent = agent
        self.tf = tf
        self.devices_recorded = False
        self.seq = itertools.count(1)

    # ---------------------------------------------------------------- config calls

    def wrap_config(self, api: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        agent = self.agent

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            before = self._initialized()
            where = caller()
            try:
                result = fn(*args, **kwargs)
            except Exception as exc:
                self._record_call(api, args, kwargs, before, where, exc)
                raise
            self._record_call(api, args, kwargs, before, where, None)
            if api.endswith("set_log_device_placement") and (args[:1] or
                                                              [kwargs.get("enabled")])[0]:
                agent.marker(RUN_MARK_PLACEMENT_ASKED)
            return result

        return wrapper

    def _initialized(self) -> bool | None:
        try:
            return context_initialized()
        except Exception:
            return None

    def _record_call(self, api: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                     initialized_before: bool | None, where: dict[str, Any] | None,
                     exc: BaseException | None) -> None:
        try:
            self.agent.emit(events.ConfigCall(api=api, order=next(self.seq),
                args=[describe(a) for a in args], kwargs={k: describe(v) for k, v in
                                                          kwargs.items()},
                initialized_before=initialized_before, caller=where,
                error_type=None if exc is None else type(exc).__name__,
                error=None if exc is None else str(exc)[:2000]))
        except Exception as err:
            self.agent.hook_error(f"recording {api}", err)

    def patch_config(self) -> None:
        for path, names in CONFIG_APIS:
            module = _resolve(self.tf, path)
            if module is None:
                continue
            for name in names:
                wrap_once(module, name,
                          functools.partial(self.wrap_config, f"tf.{path}.{name}"),
                          missing_ok=True)
        for path, name, sets in DEBUG_APIS:
            module = _resolve(self.tf, path)
            if module is not None:
                wrap_once(module, name,
                          functools.partial(self.wrap_debug, f"tf.{path}.{name}", sets),
                          missing_ok=True)

    def wrap_debug(self, api: str, sets: bool | None,
                   fn: Callable[..., Any]) -> Callable[..., Any]:
        """A debugging switch, recorded once it has taken effect (a call that raises, such
        as tf.data's debug mode after a dataset exists, changed nothing)."""
        agent = self.agent

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            where = caller()
            result = fn(*args, **kwargs)
            try:
                on = sets if sets is not None else bool(
                    args[0] if args else kwargs.get("run_eagerly"))
                agent.emit(events.DebugMode(api=api, enabled=on, caller=where))
            except Exception as err:
                agent.hook_error(f"recording {api}", err)
            return result

        return wrapper

    # ---------------------------------------------------------------- devices

    def record_devices(self, reason: str, *, force: bool = False) -> None:
        """Physical and logical devices, once TensorFlow has initialised them."""
        if self.devices_recorded and not force:
            return
        if not context_initialized():
            return
        self.devices_recorded = True
        config = self.tf.config
        physical = config.list_physical_devices()
        logical = config.list_logical_devices()
        gpus = []
        for dev in physical:
            if dev.device_type != "GPU":
                continue
            entry: dict[str, Any] = {"name": dev.name}
            for key, call in (("details", config.experimental.get_device_details),
                              ("memory_growth", config.experimental.get_memory_growth),
                              ("logical_configuration", config.get_logical_device_configuration)):
                try:
                    entry[key] = describe(call(dev)) if key == "logical_configuration" \
                        else call(dev)
                except Exception as exc:
                    entry[key] = f"unavailable: {exc}"
            gpus.append(entry)
        self.agent.emit(events.Devices(reason=reason,
            physical=[{"name": d.name, "device_type": d.device_type} for d in physical],
            logical=[{"name": d.name, "device_type": d.device_type} for d in logical],
            gpus=gpus, soft_placement=config.get_soft_device_placement(),
            cuda_build=bool(self.tf.test.is_built_with_cuda()),
            env={k: os.environ.get(k) for k in ("TF_FORCE_GPU_ALLOW_GROWTH",
                                                "CUDA_VISIBLE_DEVICES")}))


HOOKS: TfHooks | None = None


def record_devices(reason: str) -> None:
    """Called by the other hooks at moments when the devices are surely initialised."""
    if HOOKS is not None and not HOOKS.devices_recorded:
        from gpudiag.inprogram.agent import guard

        guard("recording devices", HOOKS.record_devices, reason)


def record_session_devices(session: Any) -> None:
    """A tf.compat.v1 Session's devices, when the eager context never initialised (graph
    mode): the devices TensorFlow gave that Session (no physical listing)."""
    if HOOKS is None or HOOKS.devices_recorded or context_initialized():
        return
    from gpudiag.inprogram.agent import guard

    def record() -> None:
        assert HOOKS is not None
        listed = session.list_devices()
        HOOKS.devices_recorded = True
        HOOKS.agent.emit(events.Devices(reason="session", physical=[],
                         logical=[{"name": d.name, "device_type": d.device_type}
                                  for d in listed],
                         gpus=[], soft_placement=None, cuda_build=None, env={}))

    guard("recording a Session's devices", record)


def start(agent: Agent, tf: ModuleType) -> TfHooks:
    """Right after the program's ``import tensorflow``: record it and turn on the placement
    log (before device initialisation). install.py then wraps the tf.config setters
    (``TfHooks.patch_config``) and installs the other hooks."""
    global HOOKS
    from gpudiag.inprogram import placementwindow, recorder
    from gpudiag.inprogram.agent import guard

    agent.tf = tf
    guard("TF_CPP_VMODULE", _user_vmodule, agent)
    # the program's own level (inprogram.cpplevel lent TensorFlow's import level 0 onto
    # gpudiag's stream); not captured: fd 2 was a file of the program's own
    level = agent.program_cpp_level if agent.cpp_log_captured else \
        os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    overridden = not agent.cpp_log_captured
    hooks = HOOKS = TfHooks(agent, tf)
    initialized = guard("context state", hooks._initialized)
    placement = False
    if agent.config.placement_log and (not overridden or agent.config.in_kernel):
        placement = bool(guard("placement window", placementwindow.install, agent, tf))
        if placement:
            recorder.STEP_LISTENERS.append(placementwindow.on_step)
    agent.emit(events.TfImport(version=getattr(tf, "__version__", "?"), cpp_log_level=level,
               cpp_log_level_overridden=overridden, placement_log=placement,
               initialized_at_import=initialized, caller=caller(),
               modules_before=sorted(m for m in ("keras", "tf_keras", "jax", "torch")
                                     if m in sys.modules)))
    return hooks


#: The C++ files of the placement log; a TF_CPP_VMODULE the program set that names one
#: asks for its lines, which then reach the terminal as they would plainly.
PLACEMENT_SOURCES = ("placer", "execute")


def _user_vmodule(agent: Agent) -> None:
    """TensorFlow reads TF_CPP_VMODULE when it loads: what the program set by then."""
    for part in os.environ.get("TF_CPP_VMODULE", "").split(","):
        name, _, level = part.strip().partition("=")
        if name in PLACEMENT_SOURCES and level.strip().isdigit() and int(level) > 0:
            agent.marker(f"{RUN_MARK_PLACEMENT_ASKED} {name}")
