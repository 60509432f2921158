"""The Kubernetes-facing layer: the operator's kopf handlers, its admission webhook, and their I/O.

``run`` starts one role; ``wiring`` is what both roles share (the memo,
kopf's settings, start-up); ``handlers`` (the controller) and ``webhook``
(admission, checked by ``admission``) only apply what ``application``
decides. ``kubeapi`` talks to the API server, ``serving`` is the HTTPS
server of the webhook and of ``reports`` (the progress endpoint), ``sweep``
warns running jobs, ``metrics`` exports, ``config`` holds the settings.
Only this layer and the CLI import kopf or the Kubernetes client.
"""
