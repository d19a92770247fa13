"""Probe modules for runner tests (``python -m gpudiag.child fixture_probes.misbehave``)."""
