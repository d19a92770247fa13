"""`gpudiag run -- python train.py`: the parent side of diagnosing the user's own,
unmodified program (no TensorFlow, ever).

:mod:`~gpudiag.commands.run` runs the program with gpudiag's in-program code on its
PYTHONPATH (gpudiag.inprogram: the hooks, which live apart because their rules differ),
passes its output through (:mod:`~gpudiag.run.streams`, TensorFlow's C++ log lines known by
:mod:`~gpudiag.run.cpplog`) and samples NVML; then
:mod:`~gpudiag.run.analyse` reads the events (:mod:`~gpudiag.run.eventfiles` reads the
files, :mod:`~gpudiag.run.events` takes each event of
gpudiag.layout.events through its kind's handler into one
:mod:`~gpudiag.run.runstate` per process, made by :mod:`~gpudiag.run.observation` into typed
records, :mod:`~gpudiag.records.run`) for the verdicts (the package gpudiag.verdicts.run),
joins a cluster's tasks (:mod:`~gpudiag.run.tasks`) and writes TensorBoard
(:mod:`~gpudiag.run.tbwrite`). :mod:`~gpudiag.run.options` holds the records the steps
share (RunOptions, Outcome).

While the program runs: live.py follows the events into the same per-process state and
draws its views from it (scalars, stalls, a NaN loss),
livegpu.py NVML's samples, stderrscan.py matches the saved stderr against the catalogue,
statusline.py draws the terminal's one status line (live.py and statusline.py each tick in
an every.py thread), peers.py shares a cluster's tasks'
live states in the logdir; classcount.py finds a loop's number of classes from evidence
only, placedrows.py gives a process's placement rows (its placement window's graphs, else the
placement log), profiled.py reads its profiled window's trace (run.bottleneck),
windowfacts.py gives the profiled window's placement and program facts (for run's own
window, and for `explain` of a run directory's trace, read back from its events), survivors.py
finds descendants that outlive the program; eagertrace.py splits an eager loop's profiled
steps into the ops' own time and Python's dispatch of them; processes.py follows the
program's Python processes in /proc and names those the hooks could not enter;
terminal.py gives the program a pseudo-terminal like the user's, and keyboard.py passes
the user's keys into it while a process of the program reads /dev/tty.
"""
