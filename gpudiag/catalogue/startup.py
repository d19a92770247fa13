"""The failures before any trace exists, and the lines that look like failures and are not:
GPU libraries and XLA's libdevice, the BFC allocator's out-of-memory (bfc.py tells a
fragmented pool from a full one), the end of a dataset, XLA compiling for minutes.

Part of the one catalogue (gpudiag.catalogue.all_entries). ``source`` as the package's
docstring says: ``binary`` is the format string found in TensorFlow 2.21's
libtensorflow_framework.so.2 or libtensorflow_cc.so.2 (``strings``), the example a line
of that format as users posted it (TensorFlow's or XLA's source file named in a comment
above each entry); ``captured``: printed by TensorFlow 2.21 on this project's CPU-only
machine (tests/data/tf_messages_cpu_2.21.txt).
"""

from __future__ import annotations

from gpudiag.catalogue.entry import Entry

LIBDEVICE_FIX = ("Point XLA at the CUDA directory that holds nvvm/libdevice: "
                 "`export XLA_FLAGS=--xla_gpu_cuda_data_dir=/path/to/cuda` (with pip's "
                 "tensorflow[and-cuda], the site-packages/nvidia/cuda_nvcc directory); or "
                 "install the CUDA toolkit's nvcc package, which ships libdevice.")

ENTRIES: tuple[Entry, ...] = (
    # xla/service/gpu/llvm_gpu_backend/nvptx_libdevice_path.cc (GetLibdeviceDir)
    Entry("libdevice-missing", "log", "gpu-libraries", "fail",
          r"Can't find libdevice directory \$\{CUDA_DIR\}/nvvm/libdevice",
          "XLA (jit_compile, and some of TensorFlow's GPU kernels) needs CUDA's libdevice "
          "to compile for the GPU and did not find it under any directory it searched: "
          "the first XLA-compiled step fails with 'libdevice not found'.",
          LIBDEVICE_FIX,
          "2026-03-09 23:56:35.451773: W external/local_xla/xla/service/gpu/llvm_gpu_backend"
          "/default/nvptx_libdevice_path.cc:41] Can't find libdevice directory ${CUDA_DIR}"
          "/nvvm/libdevice. This may result in compilation or runtime failures, if the "
          "program we try to run uses routines from libdevice.", "binary"),
    # xla/service/gpu/llvm_gpu_backend/nvptx_backend.cc: "libdevice not found at %s"
    Entry("libdevice-not-found", "crash", "gpu-libraries", "fail",
          r"libdevice not found at (?P<path>\S+)",
          "XLA compiled a step for the GPU and could not link CUDA's libdevice: the "
          "jit_compile step (or a kernel XLA compiles) cannot run.",
          LIBDEVICE_FIX,
          "InternalError: libdevice not found at ./libdevice.10.bc "
          "[Op:__inference_train_function_1134]", "binary"),
    # xla/tsl/framework/bfc_allocator.cc (AllocateRawInternal, dump_log_on_failure)
    Entry("bfc-out-of-memory", "log", "memory", "fail",
          r"Allocator \((?P<allocator>[^)]+)\) ran out of memory trying to allocate "
          r"(?P<size>\S+) \(rounded to (?P<rounded>\d+)\)",
          "TensorFlow's BFC allocator could not find a free chunk for a tensor. The summary "
          "that follows it in the log says which: a pool too full (the total free is less "
          "than asked) or a fragmented one (enough free in total, no single chunk large "
          "enough).",
          "Fragmentation: TF_GPU_ALLOCATOR=cuda_malloc_async in the environment. A full "
          "pool: a smaller batch per device, mixed precision, fewer live tensors, or no "
          "other process on the GPU (`nvidia-smi`).",
          "2024-07-12 14:20:01.744246: W tensorflow/tsl/framework/bfc_allocator.cc:485] "
          "Allocator (GPU_0_bfc) ran out of memory trying to allocate 488.28MiB (rounded to "
          "512000000)requested by op dual_encoder_all/model_1/conv2d_17/Relu_1", "binary"),
    # the same file, AllocateRaw with dump_log_on_failure false: a caller that can do
    # without (cuDNN's and the autotuner's scratch space) asked and falls back
    Entry("bfc-allocation-retry", "log", "memory", "info",
          r"ran out of memory trying to allocate (?P<size>\S+) with freed_by_count=\d+\. "
          r"The caller indicates that this is not a failure",
          "A convolution or matmul asked for optional scratch memory and runs with less: "
          "not an out-of-memory; at most a slower algorithm for that op.",
          "Nothing to do unless the step is slow; then leave the GPU more memory (a smaller "
          "batch, no other process on it).",
          "2020-04-29 16:25:36.594950: W tensorflow/core/common_runtime/bfc_allocator.cc:243]"
          " Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.25GiB with "
          "freed_by_count=0. The caller indicates that this is not a failure, but may mean "
          "that there could be performance gains if more memory were available.", "binary"),
    # tensorflow/core/framework/local_rendezvous.cc: "Local rendezvous is aborting with
    # status: " and the status of the iterator's end (OutOfRange "End of sequence")
    Entry("end-of-sequence", "log", "data", "info",
          r"Local rendezvous is aborting with status: OUT_OF_RANGE: End of sequence",
          "A dataset reached its end, as every finite dataset does at each epoch's or "
          "loop's end; TensorFlow 2.16 and later log it. Not an error and not a "
          "shortage of input (Keras says 'Your input ran out of data' when there is one).",
          "Nothing to do; TF_CPP_MIN_LOG_LEVEL=2 hides these lines.",
          "2024-11-03 22:49:04.222011: I tensorflow/core/framework/local_rendezvous.cc:405] "
          "Local rendezvous is aborting with status: OUT_OF_RANGE: End of sequence",
          "binary"),
    Entry("input-ran-out", "log", "data", "warn",
          r"Your input ran out of data; interrupting training",
          "fit was told to take more batches (steps_per_epoch x epochs) than the data has: "
          "training stopped early, without the remaining epochs.",
          "Add .repeat() to the dataset (fit then takes steps_per_epoch batches per epoch), "
          "or drop steps_per_epoch so that each epoch is one pass over the data.",
          "/usr/lib/python3/site-packages/keras/src/trainers/epoch_iterator.py:116: "
          "UserWarning: Your input ran out of data; interrupting training. Make sure that "
          "your dataset or generator can generate at least `steps_per_epoch * epochs` "
          "batches. You may need to use the `.repeat()` function when building your "
          "dataset.", "captured"),
    # tensorflow/compiler/jit/device_compiler.h
    Entry("xla-compiled", "log", "function", "info",
          r"Compiled cluster using XLA!",
          "XLA compiled a function (jit_compile, or auto-clustering): its first call "
          "included the compilation.", "Nothing to do.",
          "I0000 00:00:1795935047.079104   22541 device_compiler.h:208] Compiled cluster "
          "using XLA!  This line is logged at most once for the lifetime of the process.",
          "captured"),
    # xla/service/slow_operation_alarm.cc (SlowCompilationAlarm: after 2 minutes)
    Entry("xla-slow-compile", "log", "function", "warn",
          r"(?:\[Compiling module (?P<module>[^\]]+)\] )?Very slow compile\? If you want "
          r"to file a bug",
          "XLA has been compiling one module for more than 2 minutes: the first step of a "
          "jit_compile function (on a GPU, with autotuning) is compiling, not hung.",
          "Expected once per input shape: keep the shapes fixed (drop_remainder=True, "
          "padding) so it compiles once; on a GPU XLA_FLAGS=--xla_gpu_autotune_level=0 "
          "skips autotuning; jit_compile=False where compiling costs more than it saves.",
          "[Compiling module a_inference_one_step_on_data_58306__.69169] Very slow compile?"
          " If you want to file a bug, run with envvar XLA_FLAGS=--xla_dump_to=/tmp/foo and"
          " attach the results.", "binary"),
    Entry("xla-slow-operation-took", "log", "function", "info",
          r"slow_operation_alarm\.cc:\d+\]\s*The operation took (?P<took>\S+)",
          "How long the slow XLA compilation above took in the end.",
          "See the 'Very slow compile?' line.",
          "2024-09-08 12:13:16.846290: E external/xla/xla/service/slow_operation_alarm.cc:"
          "133] The operation took 8m6.9600373s", "binary"),
)
