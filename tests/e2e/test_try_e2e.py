"""`gpudiag try` end to end: `make demo`'s Keras fit fed by a per-example map whose
tf.py_function waits (gpudiag/examples/input_bound_fit.py), diagnosed, then two rounds of
the program as written against the same program with the advised num_parallel_calls
applied in-process, each fit stopped inside its first epoch after its warm-up and 20
steps. The program's file is never edited."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from helpers import findings_by_id, gpudiag, load_report, run_dirs

from gpudiag import layout
from gpudiag.commands.trialread import recorded_calls
from gpudiag.layout.compared import TriedFix
from gpudiag.layout.evidence import decode
from gpudiag.rundir import load_run
from gpudiag.verdicts.headline import wrap_entry


@pytest.mark.slow
@pytest.mark.long("a diagnosis of the demo's 144-step fit, then four trials of 30 steps")
def test_try_measures_the_parallel_map_on_the_users_own_fit(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Also the trials stopped mid-epoch with a Python map: each ends (a tf.data pipeline
    left mid-epoch with a Python map deadlocks at the interpreter's finalization, in plain
    TensorFlow too: the trial leaves the process after the hooks' exit handler) with its
    record and exit code 0; and the parallel map, advised beside vectorising for a map
    whose Python waits, is the fix tried."""
    from gpudiag import examples

    program = tmp_path / "input_pipeline_fit.py"
    program.write_bytes((Path(examples.__file__).parent / "input_bound_fit.py").read_bytes())
    source = program.read_bytes()
    logdir = tmp_path / "runs"
    proc = gpudiag("try", "--rounds", "2", "--steps", "20", "--fix", "parallel-map",
                   "--logdir", str(logdir), "--", sys.executable, str(program), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]  # the diagnosis's own exit code
    assert program.read_bytes() == source  # applied in-process, not by editing the file
    assert "5 trials" not in proc.stderr and "4 trials (2 rounds" in proc.stderr
    assert "trial 4 of 4: round 2, num_parallel_calls at input_pipeline_fit.py:" in proc.stderr
    (run_dir,) = run_dirs(logdir)
    runs = run_dir / layout.TRY_RUNS_DIR
    assert sorted(p.name for p in runs.iterdir()) == [
        "diagnosis", "r1-as-written", "r1-parallel-map", "r2-as-written", "r2-parallel-map"]
    for each in runs.iterdir():  # whole run directories, each one `gpudiag diff` reads
        assert load_run(each).status == "complete"
    result = findings_by_id(load_report(run_dir))["try.result"]["evidence"]
    assert [(t["fix"], t["returncode"], t["crash"]) for t in result["trials"]] == [
        ("", 0, None), ("parallel-map", 0, None)] * 2
    assert all(t["steps"] > 0 for t in result["trials"])
    # the measured pipeline had the parallel map at the user's line; the baseline had not
    line = next(i for i, t in enumerate(source.decode().splitlines(), 1)
                if t.strip() == "dataset = dataset.map(augment).batch(32)")
    maps = {name: [c.args for c in recorded_calls(runs / name) if c.method == "map"
                   and c.line == line] for name in ("r1-parallel-map", "r1-as-written")}
    assert maps["r1-parallel-map"][0]["num_parallel_calls"] == "AUTOTUNE"
    assert maps["r1-as-written"][0]["num_parallel_calls"] is None
    # each trial's fit stopped after its 10 warm-up steps and 20 more (48 an epoch)
    trial = findings_by_id(load_report(runs / "r2-parallel-map"))["run.throughput"]
    assert trial["evidence"]["loops"][0]["timed_steps"] < 21
    found = findings_by_id(load_report(run_dir))
    ev = decode("try.fix.parallel-map", found["try.fix.parallel-map"]["evidence"])
    assert isinstance(ev, TriedFix)
    assert ev.applied is True and ev.rounds == 2 and ev.where == f"input_pipeline_fit.py:{line}"
    assert ev.as_it_would_be == ("dataset = dataset.map(augment, num_parallel_calls="
                                 "tf.data.AUTOTUNE).batch(32)")
    assert ev.ratio is not None and ev.ratio_low is not None and ev.ratio_high is not None
    assert ev.ratio_low <= ev.ratio <= ev.ratio_high
    assert ev.predicted_ratio is not None and ev.inside is not None
    assert "the trials did not run to their end" in found["try.result"]["message"]
    # the verdict's first line: the measured answer, the fix at the user's line
    first = load_report(run_dir)["data"]["try"]["headline"]
    assert re.fullmatch(
        rf"tried 1 fix: num_parallel_calls at input_pipeline_fit\.py:{line} makes a step "
        r"\d+\.\dx faster \(95 % CI \d+\.\d-\d+\.\d, 2 rounds\)|the 1 fix tried did not help "
        r"here|the 1 fix tried was not shown to help here: too few rounds to decide \(more "
        r"--rounds\)", first), first
    shown = proc.stderr.splitlines()
    verdict_at = shown.index(wrap_entry((first,))[0])
    assert shown[verdict_at - 1] == "" and shown[verdict_at + len(wrap_entry((first,)))
                                                 ].startswith("gpudiag try: ")


#: A custom loop with every call the newer fixes change: a compile (jit_compile), a parallel
#: map kept in order (deterministic=False, and cache after it), a step tf.function made by
#: its decorator (reduce_retracing) whose calls end the trial (--steps).
FIXABLE = """\
import tensorflow as tf

ds = tf.data.Dataset.from_tensor_slices(tf.random.normal([64, 4]))
ds = ds.map(lambda v: v * 2, num_parallel_calls=2).batch(4).repeat()
model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
model.compile("sgd", "mse")
opt = tf.keras.optimizers.SGD(0.1)


@tf.function
def train_step(v):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(v)))
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                            model.trainable_variables))
    return loss


print("made:", train_step._reduce_retracing, flush=True)
try:
    for i, batch in enumerate(ds.take(40)):
        train_step(batch)
finally:
    print("finally ran", flush=True)
print("after the loop")
"""


@pytest.mark.slow
def test_the_newer_fixes_are_made_at_their_lines_and_a_custom_loop_ends_after_its_steps(
        tmp_path) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    from gpudiag import nvml
    from gpudiag.commands import run as run_cmd
    from gpudiag.commands.trialread import read_trial
    from gpudiag.fixes import BY_NAME
    from gpudiag.records.trial import TrialFix
    from gpudiag.run.options import RunOptions
    from gpudiag.session import RunSession
    from gpudiag.ui import Ui

    program = tmp_path / "fixable.py"
    program.write_text(FIXABLE)
    fixes = (TrialFix("jit-compile", "compile", "fixable.py", 6),
             TrialFix("deterministic", "map", "fixable.py", 4),
             TrialFix("cache", "map", "fixable.py", 4),
             TrialFix("reduce-retracing", "function", "fixable.py", 10))
    run_dir = tmp_path / "trial"
    with RunSession.at("run", run_dir) as one:
        code = run_cmd.run(one, [sys.executable, str(program)], ui=Ui.quiet(),
                           backend=nvml.NvmlUnavailable("not needed here"),
                           options=replace(RunOptions(), profile_steps=0, placement_log=False,
                                           echo=False, quiet=True, trial_fixes=fixes,
                                           stop_after_steps=12, stop_function="train_step"))
    out = (layout.child_path(run_dir, layout.RUN_CHILD_NAME) / "stdout.txt").read_text()
    assert code == 0, out
    # ended cleanly after the 12th call: its finally ran, what follows the loop did not
    assert "made: True" in out and "finally ran" in out and "after the loop" not in out
    calls = recorded_calls(run_dir)
    for fix in fixes[:3]:  # the hooks' own record of each call shows the change
        assert BY_NAME[fix.name].made(fix, calls), fix
    trial = read_trial(run_dir, "jit-compile", 1, None, with_losses=True)
    assert len(trial.losses) == 12 and trial.crash is None
