"""A catalogue of TensorFlow's own messages: the exact text, what it means, what to do.

Shared by `gpudiag run` (the program's stderr, TensorFlow's Python log records and its
crash), `gpudiag env` (:func:`gpu_log_lines`) and the multi-worker commands. The
package owns every entry: TensorFlow's here, the multi-worker ones in cluster.py, the
crashes of TF1 programs and of TF2 programs under Keras 3 in migrations.py, those of
fit's arguments and of a pipeline's unknown shapes in fitinput.py, the failures before
any trace exists in startup.py (bfc.py reads the BFC allocator's summary), all of
entry.py's Entry (:func:`all_entries` is the whole catalogue; gpudiag.cluster.messages
reads the cluster's messages with them). Each entry's ``example`` is real text
as TensorFlow 2.21 writes it, and ``source`` says where it was taken from:

- ``captured``: printed by TensorFlow 2.21 on this project's CPU-only machine
  (tests/data/tf_messages_cpu_2.21.txt holds the captured lines);
- ``binary``: the format string in TensorFlow 2.21's shared libraries
  (libtensorflow_framework.so.2, _pywrap_tensorflow_internal.so: ``strings``), with the
  placeholders filled as TensorFlow fills them; these need a GPU machine to print;
- ``python``: the message in TensorFlow's or Keras's Python source (file named).

matching.py holds LineMatcher (lines fed as they come, each first looked for the
entries' required literals). tests/unit/test_catalogue.py checks every pattern against its
example and the captured ones against the captured file. Pure data and regular
expressions: no TensorFlow.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpudiag.catalogue import bfc
from gpudiag.catalogue.cluster import ENTRIES as CLUSTER_ENTRIES
from gpudiag.catalogue.entry import Entry, Kind, Severity
from gpudiag.catalogue.fitinput import ENTRIES as FIT_INPUT_ENTRIES
from gpudiag.catalogue.matching import LineMatcher, LogMatch
from gpudiag.catalogue.migrations import ENTRIES as MIGRATION_ENTRIES
from gpudiag.catalogue.startup import ENTRIES as STARTUP_ENTRIES

__all__ = ["CLUSTER_ENTRIES", "ENTRIES", "FIT_INPUT_ENTRIES", "MIGRATION_ENTRIES",
           "STARTUP_ENTRIES", "Entry", "Kind", "LineMatcher", "LogMatch", "Severity", "bfc"]

_GPU_FIX = ("On Linux install a CUDA build with its libraries: `pip install "
            "'tensorflow[and-cuda]'`; check the driver with `nvidia-smi`; `gpudiag env` "
            "shows what TensorFlow and NVML see.")

ENTRIES: tuple[Entry, ...] = (
    # ------------------------------------------------------------ GPU libraries, driver
    Entry("cuda-drivers-missing", "log", "gpu-libraries", "warn",
          r"Could not find cuda drivers on your machine, GPU will not be used",
          "TensorFlow found no CUDA driver library (libcuda.so): it runs on the CPU only.",
          _GPU_FIX,
          "I0000 00:00:1795325760.395631    8366 cudart_stub.cc:31] Could not find cuda "
          "drivers on your machine, GPU will not be used.", "captured"),
    Entry("cuinit-failed", "log", "gpu-libraries", "warn",
          r"failed call to cuInit: (?P<detail>.*)",
          "The CUDA driver could not initialise: no GPU, the NVIDIA kernel module not loaded, "
          "or CUDA_VISIBLE_DEVICES hiding every GPU. TensorFlow goes on without GPUs.",
          "Where there should be a GPU: `nvidia-smi` must list it; check "
          "CUDA_VISIBLE_DEVICES; in a container pass the GPUs in (--gpus all).",
          "E0000 00:00:1795326182.674046   16316 cuda_platform.cc:52] failed call to cuInit: "
          "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)", "captured"),
    Entry("gpu-libraries-missing", "log", "gpu-libraries", "fail",
          r"Cannot dlopen some GPU libraries",
          "TensorFlow sees a GPU but cannot load CUDA or cuDNN libraries: it will not use it.",
          _GPU_FIX,
          "W tensorflow/core/common_runtime/gpu/gpu_device.cc:2256] Cannot dlopen some GPU "
          "libraries. Please make sure the missing libraries mentioned above are installed "
          "properly if you would like to use GPU.", "binary"),
    Entry("dynamic-library-missing", "log", "gpu-libraries", "fail",
          r"Could not load dynamic library '(?P<library>[^']+)'",
          "A CUDA library TensorFlow needs is not on the library path.", _GPU_FIX,
          "W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load "
          "dynamic library 'libcudnn.so.8'; dlerror: libcudnn.so.8: cannot open shared object "
          "file: No such file or directory", "binary"),
    Entry("skipping-gpu-registration", "log", "gpu-libraries", "fail",
          r"Skipping registering GPU devices",
          "TensorFlow gave up on the GPUs (libraries missing, see the lines before).", _GPU_FIX,
          "W tensorflow/core/common_runtime/gpu/gpu_device.cc:2256] Skipping registering GPU "
          "devices...", "binary"),
    Entry("cudnn-version-mismatch", "log", "gpu-libraries", "fail",
          r"Loaded runtime CuDNN library: (?P<runtime>\S+) but source was compiled with: "
          r"(?P<compiled>\S+?)\.?\s",
          "The cuDNN found at run time is older than the one TensorFlow was built with: "
          "convolutions and RNNs fail.",
          "Install the cuDNN TensorFlow was built against (`tensorflow[and-cuda]` pins it), "
          "or a TensorFlow built for your cuDNN.",
          "E external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:9261] Loaded runtime "
          "CuDNN library: 8.1.0 but source was compiled with: 8.9.4.  CuDNN library needs "
          "to have matching major version and equal or higher minor version.", "binary"),
    Entry("gpu-ignored", "log", "gpu-libraries", "fail",
          r"Ignoring visible gpu device (?P<detail>.*)",
          "A GPU was skipped, usually because its compute capability is below what this "
          "TensorFlow build supports.",
          "Use a TensorFlow build that supports this GPU's compute capability, or another GPU.",
          "I tensorflow/core/common_runtime/gpu/gpu_device.cc:1900] Ignoring visible gpu "
          "device (device: 0, name: Tesla K80, pci bus id: 0000:00:04.0, compute capability: "
          "3.7) with Cuda compute capability 3.7. The minimum required Cuda capability is 5.0.",
          "binary"),
    Entry("ptxas-too-old", "log", "gpu-libraries", "warn",
          r"ptxas too old\. Falling back to the driver to compile",
          "XLA compiles through the driver instead of ptxas: slower start, sometimes slower "
          "kernels.", "Install the CUDA toolkit's ptxas matching TensorFlow's CUDA version.",
          "W external/local_xla/xla/service/gpu/nvptx_compiler.cc:765] 12.2.140 ptxas too "
          "old. Falling back to the driver to compile.", "binary"),
    # ------------------------------------------------------------ informational, CPU
    Entry("onednn-on", "log", "config", "info", r"oneDNN custom operations are on",
          "CPU ops use oneDNN; results may differ in the last bits between runs.",
          "Nothing to do; TF_ENABLE_ONEDNN_OPTS=0 turns it off.",
          "I0000 00:00:1795325760.395349    8366 port.cc:153] oneDNN custom operations are "
          "on. You may see slightly different numerical results due to floating-point "
          "round-off errors from different computation orders. To turn them off, set the "
          "environment variable `TF_ENABLE_ONEDNN_OPTS=0`.", "captured"),
    Entry("cpu-instructions", "log", "config", "info",
          r"This TensorFlow binary is optimized to use available CPU instructions",
          "An informational notice about CPU instruction sets; not a problem.",
          "Nothing to do.",
          "I0000 00:00:1795325760.432812    8366 cpu_feature_guard.cc:227] This TensorFlow "
          "binary is optimized to use available CPU instructions in performance-critical "
          "operations.", "captured"),
    # ------------------------------------------------------------ distribution
    Entry("mirrored-devices", "log", "distribute", "info",
          r"Using MirroredStrategy with devices (?P<devices>.*)",
          "The devices MirroredStrategy replicates the model on, as TensorFlow resolved them.",
          "If a GPU is missing from the list, pass every device (or none: all GPUs) to "
          "MirroredStrategy and check CUDA_VISIBLE_DEVICES.",
          "INFO:tensorflow:Using MirroredStrategy with devices ('/job:localhost/replica:0/"
          "task:0/device:CPU:1', '/job:localhost/replica:0/task:0/device:CPU:2')", "captured"),
    Entry("strategy-devices-not-visible", "log", "distribute", "fail",
          r"Some requested devices in `tf\.distribute\.Strategy` are not visible to "
          r"TensorFlow: (?P<devices>.*)",
          "The strategy was given devices TensorFlow does not have: their replicas are "
          "missing or fall back elsewhere.",
          "Pass only devices listed by tf.config.list_logical_devices(); check "
          "CUDA_VISIBLE_DEVICES and set_visible_devices calls.",
          "WARNING:tensorflow:Some requested devices in `tf.distribute.Strategy` are not "
          "visible to TensorFlow: /job:localhost/replica:0/task:0/device:GPU:3",
          "python: tensorflow/python/distribute/cross_device_ops.py"),
    Entry("not-using-nccl-non-gpu", "log", "distribute", "info",
          r"There are non-GPU devices in `tf\.distribute\.Strategy`, not using nccl allreduce",
          "The strategy has CPU devices, so gradients are reduced without NCCL.",
          "On GPUs give the strategy only GPU devices so it can use NCCL.",
          "WARNING:tensorflow:There are non-GPU devices in `tf.distribute.Strategy`, not "
          "using nccl allreduce.", "python: tensorflow/python/distribute/cross_device_ops.py"),
    Entry("nccl-kernel-missing", "log", "distribute", "warn",
          r"Nccl kernel is not found, not using nccl allreduce",
          "This TensorFlow build has no NCCL kernels: all-reduce goes through one device, "
          "slower on several GPUs.", "Use a Linux CUDA build of TensorFlow (it ships NCCL).",
          "WARNING:tensorflow:Nccl kernel is not found, not using nccl allreduce.",
          "python: tensorflow/python/distribute/cross_device_ops.py"),
    Entry("nccl-virtual-gpus", "log", "distribute", "info",
          r"NCCL is not supported when using virtual GPUs, falling\s*back to reduction to "
          r"one device",
          "Logical GPUs split from one GPU cannot use NCCL; reduction goes through one device.",
          "Expected with virtual GPUs; on real GPUs do not split them.",
          "WARNING:tensorflow:NCCL is not supported when using virtual GPUs, fallingback to "
          "reduction to one device", "python: tensorflow/python/distribute/cross_device_ops.py"),
    Entry("collective-aborted", "log", "distribute", "fail",
          r"Collective ops is aborted by: (?P<detail>.*)",
          "A collective (all-reduce) was aborted, usually because another worker or device "
          "failed first: the real error is earlier in the log.",
          "Find the first error in the log (another worker's crash, an OOM, a timeout).",
          "E tensorflow/core/common_runtime/base_collective_executor.cc:249] Collective ops "
          "is aborted by: Deadline Exceeded", "binary"),
    Entry("nccl-failed", "log", "distribute", "fail", r"NCCL operation .+? failed: ",
          "An NCCL call failed (driver, topology or out-of-memory problem).",
          "Run with NCCL_DEBUG=INFO for NCCL's own reason; check `nvidia-smi topo -m`.",
          "NCCL operation ncclCommInitRank(&comm, nranks, id, rank) failed: unhandled cuda "
          "error. Last NCCL warning(error) log entry (may be unrelated) ''.", "binary"),
    # ------------------------------------------------------------ functions, learning
    Entry("retracing", "log", "function", "warn",
          r"(?P<count>\d+) out of the last \d+ calls to (?P<function>.+?) triggered "
          r"tf\.function retracing",
          "A tf.function is traced again and again (new shapes or Python arguments): each "
          "trace costs seconds and the step time suffers.",
          "Pass tensors of fixed shapes (or an input_signature), not Python numbers; define "
          "the tf.function once, outside the loop; or reduce_retracing=True.",
          "WARNING:tensorflow:5 out of the last 5 calls to <function f at 0x7f798fcf36a0> "
          "triggered tf.function retracing. Tracing is expensive and the excessive number "
          "of tracings could be due to (1) creating @tf.function repeatedly in a loop, (2) "
          "passing tensors with different shapes, (3) passing Python objects instead of "
          "tensors.", "captured"),
    Entry("gradients-missing", "log", "function", "fail",
          r"Gradients do not exist for variables (?P<variables>.*) when minimizing the loss",
          "Some trainable variables get no gradient: they do not take part in the loss as "
          "computed (or the tape did not watch them), so they never learn.",
          "Compute the loss from the model's outputs inside the GradientTape; check that "
          "every layer is used; give model.compile() a loss.",
          "UserWarning: Gradients do not exist for variables ['dense/kernel'] when minimizing "
          "the loss. If using `model.compile()`, did you forget to provide a `loss` argument?",
          "python: keras/src/optimizers/base_optimizer.py"),
    Entry("from-logits-on-softmax", "log", "learning", "warn",
          r"`(?P<loss>\w+)` received `from_logits=True`, but the `output` argument was "
          r"produced by a (?P<activation>\w+) activation",
          "The model's last layer applies a softmax (or sigmoid) and its loss is told the "
          "outputs are logits. Keras then takes the activation's input as the logits for "
          "this loss (keras/src/backend/tensorflow/nn.py _get_logits), so this loss is "
          "right; but anything else that reads the outputs as logits (a custom loop's "
          "tf.nn.*_cross_entropy_with_logits, a metric, a consumer of the saved model) "
          "applies the activation twice, and its loss cannot fall below ln(1 + (C-1)/e) "
          "(1.46 for 10 classes).",
          "Say it once: either drop the last activation (Dense(classes), then "
          "from_logits=True: the numerically stable form) or keep it and use "
          "from_logits=False.",
          "UserWarning: \"`sparse_categorical_crossentropy` received `from_logits=True`, but "
          "the `output` argument was produced by a Softmax activation and thus does not "
          "represent logits. Was this intended?\"",
          "python: keras/src/backend/tensorflow/nn.py"),
    Entry("oom-log", "log", "memory", "fail", r"OOM when allocating tensor (?:with|of) shape",
          "A device ran out of memory.",
          "Smaller batch per device, memory growth off for a dedicated GPU, fewer live "
          "tensors; check that other processes do not hold the GPU (`nvidia-smi`).",
          "OOM when allocating tensor with shape[8192,8192] and type float on "
          "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc", "binary"),
    # ------------------------------------------------------------ crashes
    Entry("invalid-device", "crash", "placement", "fail",
          r"Could not satisfy device specification '(?P<device>[^']+)'\. "
          r"enable_soft_placement=0",
          "An op is pinned (tf.device) to a device that does not exist, and soft placement "
          "is off.",
          "Pin to a device tf.config.list_logical_devices() lists (or use a strategy); "
          "tf.config.set_soft_device_placement(True) would run it elsewhere silently.",
          "InvalidArgumentError: Could not satisfy device specification '/job:localhost/"
          "replica:0/task:0/device:GPU:1'. enable_soft_placement=0. Supported device types "
          "[CPU]. All available devices [/job:localhost/replica:0/task:0/device:CPU:0].",
          "captured"),
    Entry("invalid-device-function", "crash", "placement", "fail",
          r"Unable to find any devices for spec (?P<device>\S+)",
          "An op inside a tf.function is pinned to a device that does not exist, and soft "
          "placement is off.",
          "Pin to a device tf.config.list_logical_devices() lists (or use a strategy).",
          "InvalidArgumentError: Unable to find any devices for spec /device:GPU:1 "
          "[Op:__inference_f_16]", "captured"),
    Entry("cannot-assign-device", "crash", "placement", "fail",
          r"Cannot assign a device for operation (?P<op>\S+)",
          "A graph op is pinned to a device that does not exist or has no kernel for it, and "
          "soft placement is off (tf.compat.v1 Session).",
          "Pin to an existing device, or ConfigProto(allow_soft_placement=True) to let it run "
          "elsewhere (then check where with `gpudiag run`).",
          "InvalidArgumentError: Cannot assign a device for operation tower_1/MatMul: node "
          "tower_1/MatMul was explicitly assigned to /device:GPU:1 but available devices are "
          "[ /job:localhost/replica:0/task:0/device:CPU:0 ].", "binary"),
    Entry("configured-after-init", "crash", "config", "fail",
          r"(?P<what>Physical|Visible|Virtual) devices cannot be modified after being "
          r"initialized",
          "A tf.config call (memory growth, visible devices, logical devices) came after "
          "TensorFlow had initialised its devices: it has no effect, it raises.",
          "Configure devices first thing after importing TensorFlow, before any op, "
          "tf.function, model, strategy or tf.config.list_logical_devices() call; or set "
          "TF_FORCE_GPU_ALLOW_GROWTH=true in the environment (no code).",
          "RuntimeError: Virtual devices cannot be modified after being initialized",
          "captured"),
    Entry("memory-growth-differs", "crash", "memory", "fail",
          r"Memory growth cannot differ between GPU devices",
          "set_memory_growth was set on some GPUs and not on others.",
          "Call tf.config.experimental.set_memory_growth(gpu, True) for every GPU.",
          "ValueError: Memory growth cannot differ between GPU devices",
          "python: tensorflow/python/eager/context.py"),
    Entry("average-loss-of-scalar", "crash", "function", "fail",
          r"Invalid value passed for `per_example_loss`\. Expected a tensor with at least "
          r"rank 1",
          "tf.nn.compute_average_loss got a loss that is already averaged (a scalar): it "
          "needs the per-example losses to divide by the global batch.",
          "Build the loss with reduction=NONE (tf.keras.losses.Reduction.NONE) and pass the "
          "per-example vector to compute_average_loss(..., global_batch_size=...).",
          "ValueError: Invalid value passed for `per_example_loss`. Expected a tensor with at "
          "least rank 1. Received per_example_loss=2.0 with rank 0", "captured"),
    Entry("variable-created-in-step", "crash", "function", "fail",
          r"tf\.function only supports singleton tf\.Variables created on the first call",
          "A variable is created inside the step function after its first call: typically "
          "an optimizer creating its slots, or a model building itself, inside the "
          "replica context of strategy.run.",
          "Create the model and build the optimizer (optimizer.build(model.trainable_"
          "variables)) inside strategy.scope() before the training loop.",
          "ValueError: tf.function only supports singleton tf.Variables created on the first "
          "call. Make sure the tf.Variable is only created once or created outside "
          "tf.function.", "captured"),
    Entry("lazy-variables-in-replica", "crash", "distribute", "fail",
          r"You must feed a value for placeholder tensor '(?P<tensor>[^']+)'",
          "A variable was created inside the step function on its first call: Keras 3 "
          "builds a model (and its optimizer) lazily, on the first batch, so under "
          "strategy.run each replica creates it, and the initial value of replica 1 and up "
          "is a placeholder of the traced function that nothing feeds.",
          "Build everything inside strategy.scope() before the loop: model.build(input "
          "shape) or call the model on one batch, and optimizer.build(model.trainable_"
          "variables); or run the program with Keras 2 (pip install tf_keras; "
          "TF_USE_LEGACY_KERAS=1).",
          "InvalidArgumentError: Graph execution error:\n\nDetected at node "
          "cond/Placeholder_1 defined at (most recent call last):\n2 root error(s) found.\n"
          "  (0) INVALID_ARGUMENT:  You must feed a value for placeholder tensor "
          "'cond/else/_1/cond/Placeholder_1' with dtype int32", "captured"),
    Entry("cross-replica-required", "crash", "distribute", "fail",
          r"Method requires being in cross-replica context",
          "Something that must run once for all replicas (creating an optimizer's variables, "
          "strategy.reduce, checkpointing) was called inside strategy.run (replica context).",
          "Call it outside strategy.run, or inside through "
          "tf.distribute.get_replica_context().merge_call(); build the optimizer in "
          "strategy.scope() before the loop.",
          "RuntimeError: Method requires being in cross-replica context, use "
          "get_replica_context().merge_call()",
          "python: tensorflow/python/distribute/distribute_lib.py"),
    Entry("tensorflow-missing", "crash", "config", "fail",
          r"No module named 'tensorflow'",
          "The Python that ran the program has no TensorFlow: often another interpreter "
          "than the one TensorFlow was installed into (python vs python3, a virtualenv not "
          "activated).",
          "Run the program with the interpreter that has TensorFlow (`python -c 'import sys; "
          "print(sys.executable)'` shows which one runs), or pip install tensorflow into it.",
          "ModuleNotFoundError: No module named 'tensorflow'", "captured"),
    Entry("oom", "crash", "memory", "fail", r"OOM when allocating tensor",
          "A device ran out of memory.",
          "Smaller batch per device; check memory growth and limits; make sure no other "
          "process holds the GPU (`nvidia-smi`).",
          "ResourceExhaustedError: OOM when allocating tensor with shape[8192,8192] and type "
          "float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
          "binary"),
)


def all_entries() -> tuple[Entry, ...]:
    """The programs-of-another-era crashes (migrations.py: first, the specific cause wins),
    fit's arguments and input (fitinput.py), TensorFlow's entries (this module) and the
    multi-worker ones (cluster.py): the one catalogue that `env`, `run` and the cluster
    commands read."""
    return MIGRATION_ENTRIES + FIT_INPUT_ENTRIES + ENTRIES + STARTUP_ENTRIES + CLUSTER_ENTRIES


def log_matcher() -> LineMatcher:
    """A LineMatcher of the log entries, to feed lines as they come."""
    return LineMatcher([e for e in all_entries() if e.kind == "log"])


def match_lines(lines: Iterable[str], kind: Kind = "log") -> list[LogMatch]:
    """Entries of ``kind`` matched by ``lines``, in catalogue order, with counts."""
    matcher = LineMatcher([e for e in all_entries() if e.kind == kind])
    matcher.feed(lines)
    return matcher.matches()


def match_crash(error_type: str, message: str) -> Entry | None:
    """The catalogue entry explaining an exception, if any (log entries too: an OOM)."""
    text = f"{error_type}: {message}"
    for e in all_entries():
        if e.kind == "crash" and e.search(text):
            return e
    return None


def by_id(entry_id: str) -> Entry:
    for e in all_entries():
        if e.id == entry_id:
            return e
    raise KeyError(entry_id)


def gpu_log_lines(stderr: str, limit: int = 16) -> list[str]:
    """The lines of a TensorFlow stderr that say why GPUs were (not) registered (`env`)."""
    gpu = [e for e in ENTRIES + STARTUP_ENTRIES if e.topic == "gpu-libraries"]
    lines = [ln.strip() for ln in stderr.splitlines() if any(e.search(ln) for e in gpu)]
    return lines[:limit]


def libraries_not_loaded(lines: Iterable[str]) -> list[str]:
    """The libraries TensorFlow's dlopen lines name as not loaded (``Could not load dynamic
    library 'libcudnn.so.8'``): why the GPUs were skipped at registration."""
    entry = by_id("dynamic-library-missing")
    found = (entry.search(line) for line in lines)
    return list(dict.fromkeys(m["library"] for m in found if m))
