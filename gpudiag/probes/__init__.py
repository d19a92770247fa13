"""Probes: one module per probe, each a ``run(config: dict) -> dict`` run inside a child.

env and placement build typed records (probes/results.py) and return their ``to_dict()``;
the parent reads them back with ``from_dict``.
"""
