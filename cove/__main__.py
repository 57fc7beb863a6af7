"""``python -m cove`` runs the ``cove`` command."""

import sys

from cove.channels.cli import main

sys.exit(main())
