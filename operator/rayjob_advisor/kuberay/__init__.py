"""The one adapter of KubeRay's ``RayJob`` (``ray.io/v1``): everything that reads or writes its manifest.

As Kueue keeps one adapter per job kind, the rest of the advisor never digs
in a RayJob: it asks ``rayjob.RayJob`` (metadata, status, holds, times),
``cluster`` (the pods that train: the scaled worker group and its resources,
``groups``; the Ray Train worker count, ``training``; scheduling hints,
``scheduling``), and gets its writes back as JSON merge patches (``manifest``:
resizes, the training count, the hooks' writes in ``hooks``).
"""
