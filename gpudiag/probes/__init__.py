"""Probes: one module per probe, each a ``run(config: dict) -> dict`` run inside a child."""
