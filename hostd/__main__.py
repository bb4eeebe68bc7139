"""``python -m hostd`` is ``hostd``."""

import sys

from hostd.cli.hostd import main

sys.exit(main())
