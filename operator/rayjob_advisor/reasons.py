"""The reasons of every Kubernetes Event (and admission warning) the advisor gives, in one place (as KEDA keeps them).

Users filter on them (``kubectl get events --field-selector reason=DeadlineAtRisk``) and alerts may match
them: a reason is part of the contract, spelled once here. Warnings carry a ``Warning`` Event, the others a
``Normal`` one; some are admission warnings only (``Message.event`` false).
"""

from __future__ import annotations

from typing import Final

# Advice before a RayJob runs (application.advise).
CANNOT_PREDICT: Final = "CannotPredict"  # bad input or an unknown workload: the ``error`` annotation says what
RECOMMENDED: Final = "Recommended"  # a plan in ``recommend`` mode (an admission warning only)
RESIZED: Final = "Resized"  # ``enforce`` resized the scaled group and Ray Train with it
NOT_RESIZED: Final = "NotResized"  # ``enforce`` could not resize: the text names the annotation to add
OTHER_ACCELERATOR: Final = "OtherAccelerator"  # predicted from another accelerator's runs
PROGRESS_OFF: Final = "ProgressOff"  # the progress hook is on where reporting is off (an admission warning only)
NOT_ADVISED: Final = "NotAdvised"  # the webhook admitted the job unchanged (a fit under way, our own failure)

# A running RayJob (the sweep); each posted once per job.
DEADLINE_AT_RISK: Final = "DeadlineAtRisk"
RUNTIME_OVERRUN: Final = "RuntimeOverrun"

# A finished RayJob (application.learn).
LEARNED: Final = "Learned"
CANNOT_LEARN: Final = "CannotLearn"
DEADLINE_MET: Final = "DeadlineMet"
DEADLINE_MISSED: Final = "DeadlineMissed"
DEADLINE_FAILED: Final = "DeadlineFailed"

# A RuntimeProfile: the reasons of its ``Fitted`` condition, and of the Events of a failed fit or a bad profile.
FITTED: Final = "Fitted"
NOT_ENOUGH_DATA: Final = "NotEnoughData"
FIT_FAILED: Final = "FitFailed"
BAD_PROFILE: Final = "BadProfile"
