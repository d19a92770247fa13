"""`gpudiag mcp`: gpudiag's read-only diagnoses of one logdir for coding agents, over the
Model Context Protocol (docs/mcp.md).

Modules: server.py (the MCPServer and its four tools, stdio), tools.py (the tools as plain
functions over one logdir, confined to it with gpudiag.rundir.confine), worker.py (each
call in a worker process with a time and a memory limit). The command line
(gpudiag.cli) calls ``server.serve``; the ``mcp`` SDK is imported only there.
"""
