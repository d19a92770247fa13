"""The failures before any trace exists (gpudiag/catalogue/startup.py, bfc.py): each entry
against TensorFlow's or XLA's own text, the BFC allocator's summary read as a fragmented or a
full pool, a skipped GPU named by its library, Horovod beside TensorFlow >= 2.16, a stall
that was XLA compiling. Plain data: no TensorFlow, no processes."""

from __future__ import annotations

import re

import pytest
from helpers import TESTS_DIR

from gpudiag import catalogue
from gpudiag.catalogue import bfc
from gpudiag.records.results import EnvResult
from gpudiag.records.run import ProcessObservation
from gpudiag.verdicts import env as env_verdicts
from gpudiag.verdicts.run import live as run_live
from gpudiag.verdicts.run import tflog

CAPTURED = (TESTS_DIR / "data" / "tf_messages_cpu_2.21.txt").read_text().splitlines()


@pytest.mark.parametrize("entry", catalogue.STARTUP_ENTRIES, ids=lambda e: e.id)
def test_every_startup_entry_matches_its_example_and_says_what_to_do(
        entry: catalogue.Entry) -> None:
    assert entry.search(entry.example), entry.id
    assert entry.meaning and entry.fix
    re.compile(entry.pattern)
    if entry.source == "captured":
        assert any(entry.search(line) for line in CAPTURED), entry.id
    assert entry in catalogue.all_entries()


# tensorflow/core/common_runtime/gpu/gpu_device.cc writes "Cannot dlopen some GPU
# libraries. ... platform.\nSkipping registering GPU devices..." after the dlopen lines of
# tsl/platform/default/dso_loader.cc ("Could not load dynamic library '" name "'; dlerror: ")
SKIPPED_LOG = """\
2021-08-06 21:37:12.570728: W tensorflow/stream_executor/platform/default/dso_loader.cc:64] \
Could not load dynamic library 'libcudnn.so.8'; dlerror: libcudnn.so.8: cannot open shared \
object file: No such file or directory; LD_LIBRARY_PATH: /usr/local/cuda/lib64
2021-08-06 21:37:12.570728: W tensorflow/core/common_runtime/gpu/gpu_device.cc:1766] Cannot \
dlopen some GPU libraries. Please make sure the missing libraries mentioned above are installed \
properly if you would like to use GPU. Follow the guide at https://www.tensorflow.org/install/gpu \
for how to download and setup the required libraries for your platform.
Skipping registering GPU devices...
"""


def _tf(horovod: str | None = None, tf_version: str = "2.21.0") -> EnvResult:
    return EnvResult(tf_version=tf_version, keras_version="3.10.0",
                     build_info={"is_cuda_build": True}, is_built_with_cuda=True,
                     is_built_with_gpu_support=True, physical_devices=[], physical_gpus=[],
                     logical_devices=[], soft_device_placement=True, env={},
                     horovod_version=horovod)


def test_gpus_skipped_at_registration_are_named_with_the_library_that_did_not_load() -> None:
    lines = catalogue.gpu_log_lines(SKIPPED_LOG)
    assert catalogue.libraries_not_loaded(lines) == ["libcudnn.so.8"]
    found = {f.id: f for f in env_verdicts.env_findings(_tf(), None, "no NVML", lines)}
    tf_gpus = found["env.tf-gpus"]
    assert tf_gpus.status == "fail"
    assert "skipped registering its GPUs, libcudnn.so.8 not loaded" in tf_gpus.message
    assert "tensorflow[and-cuda]" in (tf_gpus.advice or "")
    # no skip line: the plain "no GPU" warning, nothing invented
    plain = {f.id: f for f in env_verdicts.env_findings(_tf(), None, "no NVML", [])}
    assert plain["env.tf-gpus"].status == "warn"


def test_libdevice_missing_and_its_crash_give_the_xla_flags_fix() -> None:
    # xla/service/gpu/llvm_gpu_backend/nvptx_libdevice_path.cc, as a user posted it
    line = ("2023-05-06 16:19:54.078251: W tensorflow/compiler/xla/service/gpu/llvm_gpu_backend/"
            "gpu_backend_lib.cc:530] Can't find libdevice directory ${CUDA_DIR}/nvvm/"
            "libdevice. This may result in compilation or runtime failures, if the program we "
            "try to run uses routines from libdevice.")
    (match,) = catalogue.match_lines([line])
    assert match.entry.id == "libdevice-missing"
    assert "XLA_FLAGS=--xla_gpu_cuda_data_dir" in match.entry.fix
    crash = catalogue.match_crash("InternalError", "libdevice not found at ./libdevice.10.bc "
                                  "[Op:__some_op]")
    assert crash is not None and crash.id == "libdevice-not-found"


HEAD = ("2024-07-12 14:20:01.744246: W tensorflow/tsl/framework/bfc_allocator.cc:485] Allocator "
        "(GPU_0_bfc) ran out of memory trying to allocate 488.28MiB (rounded to 512000000)"
        "requested by op dual_encoder_all/model_1/conv2d_17/Relu_1")


def _stats(limit: str, in_use: str, largest: str) -> list[str]:
    """AllocatorStats::DebugString (xla/stream_executor/allocator_stats.cc) after "Stats: "
    (bfc_allocator.cc DumpMemoryLog): one LOG(INFO), so only its first line has a prefix."""
    return ["2024-07-12 14:20:01.760000: I tensorflow/tsl/framework/bfc_allocator.cc:1114] "
            "Stats: ", f"Limit:            {limit:>20}", f"InUse:            {in_use:>20}",
            f"MaxInUse:         {in_use:>20}", f"NumAllocs:        {1234:>20}",
            f"MaxAllocSize:     {'1.00GiB':>20}", f"Reserved:         {'0B':>20}",
            f"PeakReserved:     {'0B':>20}", f"LargestFreeBlock: {largest:>20}"]


def test_bfc_summary_tells_fragmentation_from_a_full_pool() -> None:
    fragmented = bfc.out_of_memory(
        [HEAD, "Bin (256): \tTotal Chunks: 85, Chunks in use: 85. 21.2KiB allocated for "
         "chunks.", *_stats("38.00GiB", "35.02GiB", "361.64MiB")])
    assert len(fragmented) == 1
    assert fragmented[0].requested_bytes == 512000000
    assert fragmented[0].kind == "fragmentation"
    assert "largest free chunk 361.6 MiB" in fragmented[0].describe()
    full = bfc.out_of_memory([HEAD, *_stats("38.00GiB", "37.90GiB", "100.00MiB")])
    assert full[0].kind == "full"
    # older TensorFlow printed the Stats as plain byte counts (%20lld)
    old = bfc.out_of_memory([HEAD, *_stats("15518924800", "14518924800", "300000000")])
    assert old[0].kind == "fragmentation" and old[0].limit_bytes == 15518924800
    # INFO lines hidden (TF_CPP_MIN_LOG_LEVEL=1): the head alone cannot tell
    assert bfc.out_of_memory([HEAD])[0].kind == "unknown"
    assert bfc.out_of_memory(["an unrelated line", "Limit: 5"]) == []


def _real(head: str, pool: str, limit: str, in_use: str) -> list[str]:
    """The lines of a BFC summary as public logs of TensorFlow 2.13-2.15 show them
    (tensorflow/tsl/framework/bfc_allocator.cc:1109 and 1114: LargestFreeBlock printed 0)."""
    return [head, "2023-10-02 16:36:14.407841: I tensorflow/tsl/framework/bfc_allocator.cc:1109]"
            f" Total bytes in pool: {pool} memory_limit_: {limit} available bytes: 0 "
            "curr_region_allocation_bytes_: 7005929472",
            "2023-10-02 16:36:14.407857: I tensorflow/tsl/framework/bfc_allocator.cc:1114] "
            "Stats: ", f"Limit:                      {limit}",
            f"InUse:                       {in_use}", "MaxInUse:                   3288551168",
            "LargestFreeBlock:                    0", ""]


def test_real_summaries_a_full_pool_and_a_fragmented_one() -> None:
    # a dual encoder on a 40 GB pool: 362 MiB free, 488 MiB asked (a public log)
    full = bfc.out_of_memory(_real(HEAD, "40231108608", "40231108608", "39851412480"))
    assert full[0].kind == "full" and "362.1 MiB free" in full[0].describe()
    # a CIFAR-10 loop on a 3.5 GB pool: 2.8 GiB free in pieces, 586 MiB asked
    head = ("2023-10-02 16:36:14.402881: W tensorflow/tsl/framework/bfc_allocator.cc:485] "
            "Allocator (GPU_0_bfc) ran out of memory trying to allocate 585.94MiB (rounded to "
            "614400000)requested by op _EagerConst")
    fragmented = bfc.out_of_memory(_real(head, "3502964736", "3502964736", "589212672"))
    assert fragmented[0].kind == "fragmentation"
    assert "largest free chunk" not in fragmented[0].describe()  # its 0 is no size
    # a pool that could not grow to its limit: the GPU's memory held elsewhere
    grow = bfc.out_of_memory(_real(head, "1000000000", "3502964736", "589212672"))
    assert grow[0].kind == "could-not-grow"
    assert "nvidia-smi" in (bfc.meaning_and_fix(grow) or ("", ""))[1]


def test_run_tf_log_gives_the_fix_that_fits_the_kind_of_out_of_memory() -> None:
    lines = [HEAD, *_stats("38.00GiB", "35.02GiB", "361.64MiB")]
    frag = tflog.tf_log(catalogue.match_lines(lines), None, "",
                               bfc.out_of_memory(lines))
    assert frag.status == "fail" and "fragmentation" in frag.message
    assert "TF_GPU_ALLOCATOR=cuda_malloc_async" in (frag.advice or "")
    lines = [HEAD, *_stats("38.00GiB", "37.90GiB", "100.00MiB")]
    full = tflog.tf_log(catalogue.match_lines(lines), None, "",
                               bfc.out_of_memory(lines))
    assert "the pool is full" in full.message
    assert (full.advice or "").startswith("The model does not fit as run: a smaller batch")


def test_a_retry_the_caller_can_do_without_is_not_an_out_of_memory() -> None:
    line = ("2020-06-06 12:47:45.908022: W tensorflow/core/common_runtime/bfc_allocator.cc:239] "
            "Allocator (GPU_0_bfc) ran out of memory trying to allocate 3.46GiB with "
            "freed_by_count=0. The caller indicates that this is not a failure, but may mean "
            "that there could be performance gains if more memory were available.")
    assert [m.entry.id for m in catalogue.match_lines([line])] == ["bfc-allocation-retry"]
    assert tflog.tf_log(catalogue.match_lines([line]), None).status == "ok"


def test_end_of_sequence_is_benign_and_input_running_out_is_not() -> None:
    # tensorflow/core/framework/local_rendezvous.cc, as TensorFlow 2.17 logs it
    end = ("2024-11-03 22:49:04.222011: I tensorflow/core/framework/local_rendezvous.cc:405] "
           "Local rendezvous is aborting with status: OUT_OF_RANGE: End of sequence")
    benign = tflog.tf_log(catalogue.match_lines([end, end]), None)
    assert benign.status == "ok" and "end-of-sequence" in benign.message
    # keras/src/trainers/epoch_iterator.py, printed here by Keras 3 (the captured file)
    ran_out = next(ln for ln in CAPTURED if "Your input ran out of data" in ln)
    short = tflog.tf_log(catalogue.match_lines([end, ran_out]), None)
    assert short.status == "warn" and "input-ran-out" in short.message
    assert ".repeat()" in (short.advice or "")


def test_horovod_beside_tensorflow_2_16_or_later_points_to_multi_worker_mirrored() -> None:
    def horovod(tf_info: EnvResult) -> list:
        return [f for f in env_verdicts.env_findings(tf_info, None, "no NVML", [])
                if f.id == "env.horovod"]

    (late,) = horovod(_tf("0.28.1", "2.21.0"))
    assert late.status == "warn" and "Horovod 0.28.1" in late.message
    assert "MultiWorkerMirroredStrategy" in (late.advice or "")
    (fine,) = horovod(_tf("0.28.1", "2.15.1"))
    assert fine.status == "ok"
    assert horovod(_tf(None)) == []


def _stalled(jit: bool, t: float | None = None) -> ProcessObservation:
    from gpudiag.records.run import StepSeries

    stall = {"t": t, "waited_s": 75.0, "timeout_s": 60.0, "steps": 40, "ended_after_s": 190.0,
             "where": {"kind": "runtime", "frame": {"file": "/x/train.py", "line": 31,
                                                    "function": "<module>",
                                                    "code": "model.fit(ds)"}}}
    series = StepSeries("fit", "fit", [], facts={"jit_compile": jit})
    return ProcessObservation(pid=10, ppid=1, argv=["train.py"], start_env={},
                              tf_version="2.21.0", stalls=[stall], series=[series])


def test_a_stall_while_xla_compiled_for_minutes_is_named_compiling_not_hung() -> None:
    # xla/service/slow_operation_alarm.cc, as a Keras program's log shows it
    log = catalogue.match_lines([
        "E0000 00:00:1795935047.079104   22541 slow_operation_alarm.cc:73] ",
        "[Compiling module a_inference_one_step_on_data_58306__.69169] Very slow compile? If "
        "you want to file a bug, run with envvar XLA_FLAGS=--xla_dump_to=/tmp/foo and attach "
        "the results.",
        "E0000 00:00:1795935247.079104   22541 slow_operation_alarm.cc:140] The operation took "
        "3m2.369747s"])
    found = run_live.stall(_stalled(jit=True), "", log)
    assert "XLA compiling, not hung" in (found.title or "")
    assert "(when, against the stall, not known)" in found.message
    # the compilation (3m2 s up to 1795935247.08) overlaps the stall (75 s before t, 190 s)
    during = run_live.stall(_stalled(jit=True, t=1795935100.0), "", log)
    assert "XLA compiled one module for more than 2 minutes while the step waited" in \
        during.message
    # a stall long after the compilation is a stall
    later = run_live.stall(_stalled(jit=True, t=1795999000.0), "", log)
    assert "XLA" not in (later.title or "") and "XLA" not in later.message
    assert "the step function is jit_compile" in found.message and "3m2.369747s" in found.message
    assert "--xla_gpu_autotune_level=0" in (found.advice or "")
    # without XLA's line the stall is said as before: nothing assumed from jit_compile alone
    plain = run_live.stall(_stalled(jit=True), "", [])
    assert "XLA" not in (plain.title or "") and "XLA" not in plain.message
