"""``python -m orchestration.cli``: the ``dora`` command."""

import sys

from orchestration.cli import main

sys.exit(main())
