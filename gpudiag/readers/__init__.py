"""Readers of what TensorFlow writes, pure and TensorFlow-free: the placement log
(placementlog.py) and profiler traces (traces.py)."""
