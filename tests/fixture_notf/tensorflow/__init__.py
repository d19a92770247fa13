"""Stands in for a missing TensorFlow: importing it fails as a missing module does."""

raise ModuleNotFoundError("No module named 'tensorflow'", name="tensorflow")
