"""``python -m rayjob_advisor.cli``: the ``rayjob-advisor`` command."""

import sys

from rayjob_advisor.cli.verbs import main

sys.exit(main())
