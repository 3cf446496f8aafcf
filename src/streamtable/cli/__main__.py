"""``python -m streamtable.cli``: the ``streamtable`` command."""

import sys

from streamtable.cli import main

sys.exit(main())
