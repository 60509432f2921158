"""Every error the advisor raises on purpose, in one tree: a base, the user's errors, the ones that pass.

``UserError``: input someone can fix (an annotation, a manifest, a profile,
a file, a flag). Its text is the whole message — one line, never a
traceback — and each face catches this base once: the operator turns it
into the ``error`` annotation and a warning, the CLI and the kubectl plugin
into one ``error:`` line. ``RetryableError``: a condition that passes on
its own (a fit under way, a write that lost a race): try again shortly.
Anything else is a bug of ours, reported as one (and still never blocks a
RayJob). A library's warning is no message a user can act on: each face
hides them (``hide_library_warnings``).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence


def hide_library_warnings() -> None:
    """Keep Python warnings (NumPy's divide-by-zero, scikit-learn's, deprecations) off users' terminals and the
    operator's log: the CLIs call this first, the operator at start-up. The models handle the values that warn;
    ``python -W`` or ``PYTHONWARNINGS`` still show them."""
    if not sys.warnoptions:
        warnings.simplefilter("ignore")


class AdvisorError(Exception):
    """The base of the advisor's own errors."""


class UserError(AdvisorError):
    """Input someone can fix; the message says what and how."""


class RetryableError(AdvisorError):
    """A condition that passes on its own: the same request succeeds a little later."""


class AnnotationError(UserError, ValueError):
    """User annotations that cannot be parsed; the message names each key."""


class UnpredictableJob(UserError, ValueError):
    """A RayJob whose runtime cannot be predicted from its manifest, and why."""


class UnknownWorkload(UserError, LookupError):
    """No profile serves the workload a RayJob names (or it names none)."""


class NoProfileYet(UnknownWorkload):
    """The workload has no profile the job may use yet, or its own has too few runs: not a mistake to fix, since
    the workload's finished jobs make one (a note on the job, not an ``error``)."""


class BadProfile(UserError, ValueError):
    """A RuntimeProfile the operator cannot use (no workload, an invalid observation, not an object)."""


class DuplicateWorkload(BadProfile):
    """A RuntimeProfile of a workload an older one in its namespace names: not used while that one is there."""


class ObservationsError(UserError, ValueError):
    """A CSV file of runs that cannot be used as it is; lists every problem found (one per line)."""

    def __init__(self, problems: Sequence[object]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))


class BadPlan(UserError, ValueError):
    """A profiling plan file that cannot be used (``planning.plan``): one line naming each bad field."""


class UsageError(UserError):
    """A command given wrongly, or a file or kubeconfig it cannot use (the CLI's and the kubectl plugin's)."""


class NoCluster(UsageError):
    """Neither in a cluster nor a usable kubeconfig: the operator has nothing to talk to."""


class BadReview(UserError, ValueError):
    """A request body that is no AdmissionReview an API server would send (a 400)."""


class Rejected(UserError):
    """A progress report refused: the HTTP status and the one line the reporter gets."""

    def __init__(self, status: int, text: str, retry_after: float | None = None) -> None:
        super().__init__(text)
        self.status = status
        self.text = text
        self.retry_after = retry_after  # a 429's: seconds until the reporter may try again


class NotRefinable(UserError, ValueError):
    """A progress report that cannot refine this job's ETA (not running, never predicted); the text says why."""


class ProfileNotReady(RetryableError):
    """The job's profile has no fitted model yet: try again shortly, never fit on the request path."""


class ProfileConflict(RetryableError):
    """A RuntimeProfile kept changing under our writes: try again later."""


class ApiUnavailable(RetryableError):
    """The API server did not answer a read the advice needs (a clusterSelector job's RayCluster): try again later."""
