"""rayjob-advisor: predicts KubeRay RayJob runtimes and sizes workers to meet deadlines."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("rayjob-advisor")  # setuptools-scm's, from the git tag (docs/releasing.md)
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0+unknown"
