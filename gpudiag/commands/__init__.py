"""One module per CLI command: ``run(session, ...)`` gathers evidence and adds findings.

The CLI parses options and renders; these functions do the work between, so they are
called the same way from the CLI, from tests and from `make demo`.
"""
