"""Process handling: every child gpudiag starts (probes, the watched command, cluster
tasks, TensorBoard) as the leader of its own process group (group.py), watched by the
reaper so nothing outlives gpudiag; probe children (runner.py, child.py); a command's exit
status in words (exitstatus.py) and how a watched command is resolved and stopped
(command.py). TensorFlow-free."""
