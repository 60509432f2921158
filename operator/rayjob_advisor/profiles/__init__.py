"""Runtime profiles: the runs of each workload, the model fitted on them, and where they come from and go.

``profile``: one workload's runs and its fit (one frozen record at a time);
``store``: the profiles a job may use, and what is left to fit and publish;
``refitter``: fits them off the request path; ``codec``: RuntimeProfile
objects; ``shipped``: the embedded profiles (``data/``); ``history``: the
bounded runs learned from finished jobs.
"""
