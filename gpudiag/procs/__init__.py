"""Process handling: every child gpudiag starts (probes, the watched command, cluster
tasks, TensorBoard) as the leader of its own process group (group.py), watched by the
reaper so nothing outlives gpudiag (each child waits at gate.py until the reaper knows its
group); probe children (runner.py, child.py); a command's exit
status in words (exitstatus.py) and how a watched command is resolved and stopped
(command.py). `run`'s program is started through shim.py, the holder of its process group
(the program itself is no group leader, so setpgrp/setsid work as plainly); jobcontrol.py
passes Ctrl-Z and fg/bg on to it; stdstreams.py reopens gpudiag's own standard streams on
/dev/null where its caller closed them; stops.py turns SIGTERM and SIGHUP into Ctrl-C's
path and keeps a stop request whose exception a callback dropped. TensorFlow-free."""
