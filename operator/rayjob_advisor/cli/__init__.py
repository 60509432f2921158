"""The command lines: ``rayjob-advisor`` (``verbs``) and ``kubectl rayjob-advisor`` (``kubectl_plugin``).

Both only present what the layers below answer: they read files and flags
(``manifests``), print tables (``tables``), and turn a ``UserError`` into one
``error:`` line.
"""
