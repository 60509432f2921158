"""What the advisor concludes about one RayJob, as plain values: its features, prediction, plan, ETA, completion.

Nothing here reads a manifest (``kuberay`` does), fits a model (``profiles``
does) or talks to Kubernetes (``kube`` does): ``features`` of a job, a
``prediction`` and what-if table of them, the ``planner``'s size for a
deadline, a running job's ``eta`` and warnings, a finished job's
``completions``.
"""
