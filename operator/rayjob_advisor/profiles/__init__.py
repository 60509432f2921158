"""Runtime profiles: the runs of each workload, the model fitted on them, and where they come from and go.

``store`` holds the profiles the operator predicts from (one frozen fit
each); ``refitter`` fits them off the request path; ``codec`` reads and
writes RuntimeProfile objects; ``shipped`` is the embedded data (``data/``);
``history`` bounds the runs learned from finished jobs.
"""
