"""rayjob-advisor: predicts KubeRay RayJob runtimes and sizes workers to meet deadlines."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("rayjob-advisor")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0"
