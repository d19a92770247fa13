"""Readers of what TensorFlow writes, pure and TensorFlow-free: the placement log
(placementlog.py), profiler traces (traces.py: xplane.pb through xprof's ProfileData,
xspacescan.py its framing checked, and refused when empty elements abound, before xprof
reads it),
the step broken down per device (stepbreakdown.py, with steprecords.py its records,
stepwindows.py its steps,
intervals.py its interval sets and
xprofview.py xprof's own input-pipeline analysis in a child process, and gpukernels.py
a GPU's kernels: per step, their times and gaps, top kernels and ops, half precision and
Tensor Core shares) and the placement
log's ops and variables per cluster task (clusterplacement.py)."""
