"""Benchmarks, run as modules from the repository root: ``.venv/bin/python -m benchmarks.accuracy``."""
