"""``python -m haltwise`` runs the ``haltwise`` command."""

import sys

from .cli import main

sys.exit(main())
