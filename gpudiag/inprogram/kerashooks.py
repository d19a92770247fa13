"""Keras ``Model.fit``: a callback gpudiag adds beside the program's own.

``Model.fit`` of keras (Keras 3) and tf_keras (Keras 2) is wrapped to append one callback
to the program's ``callbacks`` (the program's callbacks stay, in their order). It records:

- at the start (``fit_begin``): epochs, steps, batch size and examples when they can be
  known, the model's output width (the number of classes), the loss, optimizer and its
  learning rate, metric names, the strategy the model was built under, the trainable
  parameter count;
- every batch (``fit_steps``, buffered as gpudiag.inprogram.recorder.StepBuffer does): its start
  time (main thread) and the logs Keras hands to callbacks (loss and metrics: running means
  over the epoch). The callback is ``async_safe``: under Keras 3 its batch-end runs where
  Keras already converts the logs, so it adds no device sync to the step;
- each epoch's logs (``fit_epoch``, validation included), and ``fit_end``;
- a fingerprint of the trainable weights at the start (or after the first batch when the
  model builds then) and at the end (gpudiag.inprogram.weights): did they move at all?

The batches also drive the profiler window (gpudiag.inprogram.profilewindow). Model.compile
and the dtype policy are gpudiag.inprogram.kerasconfig's.
"""

from __future__ import annotations

import functools
import time
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpudiag.inprogram import callbacktimes, kerasconfig, lossfacts, trial, weights
from gpudiag.inprogram.agent import caller_frame, patch
from gpudiag.inprogram.config import UNBUFFERED_FIRST_STEPS
from gpudiag.inprogram.recorder import StepBuffer
from gpudiag.layout import events, loopevents

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent

CALLBACKS_POSITION = 5  # fit(x, y, batch_size, epochs, verbose, callbacks, ...)


def _plain_logs(logs: Any) -> dict[str, float]:
    out = {}
    for k, v in (logs or {}).items():
        try:
            out[str(k)] = float(v)
        except (TypeError, ValueError):
            continue
    return out


def _batch_size(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int | None, int | None]:
    """(batch size, number of examples) of a fit call, where they can be known cheaply."""
    x = args[0] if args else kwargs.get("x")
    batch = args[2] if len(args) > 2 else kwargs.get("batch_size")
    shape = getattr(x, "shape", None)
    if shape is not None and len(shape) > 0 and shape[0] is not None:
        return (int(batch) if batch else 32), int(shape[0])
    if isinstance(x, list | tuple) and x and getattr(x[0], "shape", None) is not None:
        return (int(batch) if batch else 32), int(x[0].shape[0])
    if isinstance(x, dict) and x:
        first = next(iter(x.values()))
        if getattr(first, "shape", None) is not None:
            return (int(batch) if batch else 32), int(first.shape[0])
    spec = getattr(x, "element_spec", None)  # a tf.data.Dataset
    if spec is not None:
        first = spec[0] if isinstance(spec, tuple) else spec
        dims = getattr(getattr(first, "shape", None), "as_list", lambda: None)()
        if dims and dims[0]:
            return int(dims[0]), None
        return _dataset_batch(x), None
    return (int(batch) if batch else None), None


def _dataset_batch(dataset: Any) -> int | None:
    """The batch size of the last .batch() in a tf.data pipeline (shuffle, prefetch, map
    after it keep it), read from the pipeline's own attributes; None if not found."""
    for _ in range(20):
        size = getattr(dataset, "_batch_size", None)
        if size is not None:
            value = size.numpy() if hasattr(size, "numpy") else size
            return int(value) if int(value) > 0 else None
        dataset = getattr(dataset, "_input_dataset", None)
        if dataset is None:
            return None
    return None


def _guarded(agent: Agent, method: Callable[..., None]) -> Callable[..., None]:
    """A callback method whose errors are gpudiag's, recorded, never raised into fit."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            method(*args, **kwargs)
        except Exception as exc:
            agent.hook_error(f"fit callback {method.__name__}", exc)

    return wrapper


def _model_facts(model: Any, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the fit_begin event says of the model (gpudiag.layout.loopevents.FitBegin), and of
    what its loss is given (``data``: lossfacts.fit_data)."""
    # which model: fits of the same one are one training run (run.learning)
    facts: dict[str, Any] = {"model": type(model).__name__, "model_id": id(model)}
    try:
        outputs = getattr(model, "outputs", None) or []
        facts["output_width"] = int(outputs[0].shape[-1]) if outputs else None
    except Exception:
        facts["output_width"] = None
    facts["loss"] = repr(getattr(model, "loss", None))[:200]
    opt = getattr(model, "optimizer", None)
    facts["optimizer"] = type(opt).__name__ if opt is not None else None
    try:
        rate = opt.learning_rate  # type: ignore[union-attr]
        # a MirroredStrategy's is a MirroredVariable, which float() refuses
        facts["learning_rate"] = float(rate.numpy() if hasattr(rate, "numpy") else rate)
    except Exception:
        facts["learning_rate"] = None
    strategy = getattr(model, "distribute_strategy", None)
    facts["strategy"] = type(strategy).__name__ if strategy is not None else None
    facts["replicas"] = getattr(strategy, "num_replicas_in_sync", None)
    facts.update(lossfacts.reduction_facts(model, strategy))
    try:  # an unbuilt model (tf_keras before its first call) raises here
        trainable = list(model.trainable_weights)
    except Exception:
        trainable = None
    try:
        facts["trainable_parameters"] = None if trainable is None else int(sum(
            int(getattr(w, "size", 0) or 0) for w in trainable))
    except Exception:
        facts["trainable_parameters"] = None
    facts["trainable_bytes"] = None if trainable is None else \
        weights.logical_bytes(trainable)
    policy = getattr(model, "dtype_policy", None)  # Keras 3 and tf_keras: a named policy
    facts["dtype_policy"] = policy if isinstance(policy, str) else \
        getattr(policy, "name", None)
    return facts | lossfacts.begin_facts(model, data)


def _fingerprint(agent: Agent, recorder: Any, phase: str) -> None:
    """The fit's trainable weights' fingerprint (tracked from the first built model)."""
    if not recorder.refs and getattr(recorder.model, "built", False):
        recorder.refs = weights.track(recorder.model.trainable_weights)
    if recorder.refs:
        agent.emit(events.Weights(source=recorder.label, phase=phase, calls=recorder.step,
                                  fingerprint=weights.fingerprint(recorder.refs)))


def _callback_times(agent: Agent, timed: list[callbacktimes.Timed], epoch: int | None) -> None:
    """The program's callbacks' times so far in this fit (cumulative)."""
    if timed:
        agent.emit(loopevents.CallbackTimes(epoch=epoch, callbacks=[t.to_dict() for t in timed]))


def make_callback_class(agent: Agent, keras: ModuleType) -> type:  # noqa: C901  its class's small methods, summed
    base = keras.callbacks.Callback

    class GpudiagFitRecorder(base):  # type: ignore[misc, valid-type]
        """gpudiag's fit recorder (added by `gpudiag run`; it changes nothing)."""

        async_safe = True

        def __init__(self, batch_size: int | None, examples: int | None, buffer: StepBuffer,
                     timed: list[callbacktimes.Timed] | None = None,
                     data: dict[str, Any] | None = None) -> None:
            super().__init__()
            self.timed = timed or []  # the program's callbacks, timed for this fit
            # and lossfacts.fit_data: the labels and inputs fit was given
            self.batch_size, self.examples, self.data = batch_size, examples, data
            self.label = "Model.fit"
            self.epoch, self.step = 0, 0
            self.begun: int | None = None
            self.starts: dict[int, float] = {}
            self.refs: list[Any] = []
            self.buffer = buffer

        def _fingerprint(self, phase: str) -> None:
            _fingerprint(agent, self, phase)

        def on_train_begin(self, logs: Any = None) -> None:
            from gpudiag.inprogram.tfhooks import record_devices

            # the same model fitted again is the same loop to the placement window: its
            # ops are placed as before (a notebook calling fit once an epoch opens it once)
            self.buffer.window_key = ("fit", id(self.model))
            record_devices("fit")
            agent.emit(loopevents.FitBegin(params=dict(self.params or {}), **_model_facts(
                self.model, self.data), batch_size=self.batch_size, examples=self.examples))
            self._fingerprint("begin")

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.epoch = epoch

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            self._end_step()  # the profiler's start and stop: before this batch's start
            profile = agent.profile
            if profile is not None and not profile.done:
                profile.step_begin(self, self.step)
            self.begun = self.step
            self.starts[self.step] = time.time()
            if self.step == 1 and not self.refs:
                self._fingerprint("after-first-batch")
            self.step += 1

        def _end_step(self) -> None:
            if self.begun is not None:
                profile = agent.profile
                if profile is not None and not profile.done:
                    profile.step_end(self, self.begun)
                self.begun = None

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.buffer.add({"i": (step := self.step - 1), "epoch": self.epoch, "batch": batch,
                             "t0": self.starts.pop(step, None), "t_end": time.time(),
                             "logs": _plain_logs(logs)})
            trial.after_step(self.model, self.step)  # `gpudiag try`: its steps done

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            self._end_step()
            self.buffer.flush()
            _callback_times(agent, self.timed, epoch)
            agent.emit(loopevents.FitEpoch(logs=_plain_logs(logs)))

        def on_train_end(self, logs: Any = None) -> None:
            self._end_step()
            self.buffer.flush()
            self._fingerprint("end")
            _callback_times(agent, self.timed, None)
            agent.emit(loopevents.FitEnd(iterations=_iterations(self.model)))

    for name, method in list(vars(GpudiagFitRecorder).items()):  # every Keras hook it has
        if name.startswith("on_"):
            setattr(GpudiagFitRecorder, name, _guarded(agent, method))
    return GpudiagFitRecorder


def _iterations(model: Any) -> int | None:
    """The optimizer's step counter at the end of fit (``optimizer.iterations``: the global
    step; under ParameterServerStrategy a variable on a parameter server, read once)."""
    try:
        return int(model.optimizer.iterations.numpy())
    except Exception:
        return None


def batch_hooks_refused(keras: ModuleType, model: Any) -> str | None:
    """Why this fit refuses a callback with batch-level hooks (None: it takes one).
    tf_keras raises ValueError for one under ParameterServerStrategy (its CallbackList's
    ``_disallow_batch_hooks_in_ps_strategy``); gpudiag must not make fit fail."""
    if not keras.__name__.startswith("tf_keras"):
        return None
    strategy = getattr(model, "distribute_strategy", None)
    if not getattr(strategy, "_should_use_with_coordinator", False):
        return None
    return (f"{type(strategy).__name__}: tf_keras refuses callbacks with batch-level hooks, "
            "so gpudiag's fit recorder stood aside from the batches (fit's epochs recorded; "
            "no per-step timing and no profiler window from fit)")


def epochs_only(recorder_cls: type, keras: ModuleType) -> type:
    """The fit recorder without batch-level hooks (Keras's own no-op methods put back, so
    Keras sees none)."""
    base = keras.callbacks.Callback
    return type("GpudiagFitEpochRecorder", (recorder_cls,), {
        "on_train_batch_begin": base.on_train_batch_begin,
        "on_train_batch_end": base.on_train_batch_end})


def install(agent: Agent, keras: ModuleType) -> None:
    model_cls = getattr(keras, "Model", None)
    if model_cls is None or hasattr(model_cls.fit, "__gpudiag_wrapped__"):
        return
    original = model_cls.fit
    recorder_cls = make_callback_class(agent, keras)
    agent.emit(events.KerasImport(module=keras.__name__,
                                  version=getattr(keras, "__version__", "?")))

    epochs_only_cls = epochs_only(recorder_cls, keras)
    buffers: dict[int, tuple[Callable[[], Any], StepBuffer]] = {}

    def buffer_of(model: Any) -> StepBuffer:
        """One step buffer per model, however many times it is fitted: a notebook fitting
        one epoch a call is one loop (its first steps written one by one once, its rows
        aggregated past the bound over all the calls, one buffer for the flusher). Once the
        model is gone its buffer is retired (the flusher writes what is left and drops
        it). A model that cannot be referenced weakly (none of Keras') gets one a call."""
        found = buffers.get(id(model))
        if found is not None and found[0]() is model:
            return found[1]
        buffer = StepBuffer(agent.emit, "fit_steps", agent.config.flush_interval_s,
                            UNBUFFERED_FIRST_STEPS, None)
        try:
            ref = weakref.ref(model)
        except TypeError:
            return buffer
        buffers[id(model)] = (ref, buffer)  # a dead model's entry is replaced here
        weakref.finalize(model, buffer.retire)
        return buffer

    @functools.wraps(original)
    def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        timed: list[callbacktimes.Timed] = []
        try:
            from gpudiag.inprogram.tracing import user_line

            batch, examples = _batch_size(args, kwargs)
            refused = batch_hooks_refused(keras, self)
            given_callbacks = args[CALLBACKS_POSITION] if len(args) > CALLBACKS_POSITION \
                else kwargs.get("callbacks")
            at = user_line(caller_frame(1))
            if isinstance(given_callbacks, list | tuple) and not refused:
                timed = callbacktimes.time_callbacks(given_callbacks, keras.callbacks.Callback,
                                                     at)
            callback = (epochs_only_cls if refused else recorder_cls)(
                batch, examples, buffer_of(self), timed, lossfacts.fit_data(args, kwargs, at))
            if refused:
                agent.emit(events.HookNote(where="Model.fit", message=refused))
            if len(args) > CALLBACKS_POSITION:
                args = (*args[:CALLBACKS_POSITION],
                        [*list(args[CALLBACKS_POSITION] or []), callback],
                        *args[CALLBACKS_POSITION + 1:])
            else:
                given = kwargs.get("callbacks")
                if given is None or isinstance(given, list | tuple):
                    kwargs["callbacks"] = [*list(given or []), callback]
                else:
                    agent.emit(events.HookNote(where="Model.fit",
                               message="callbacks given as a CallbackList: fit not recorded"))
        except Exception as exc:
            agent.hook_error("Model.fit callback", exc)
        try:  # the program's exceptions: patch()'s gate drops gpudiag's frames from them
            return original(self, *args, **kwargs)
        finally:
            for t in timed:
                t.restore()

    patch(model_cls, "fit", fit, wraps=original)
    kerasconfig.install_compile(agent, model_cls)
    kerasconfig.install_policy(agent, keras)
    if keras.__name__ == "keras":  # Keras 3's data adapters (tf_keras: not hooked)
        from gpudiag.inprogram import pydata
        from gpudiag.inprogram.agent import guard

        guard("Python data class hooks", pydata.install, agent)


