"""``python -m hostd`` is ``hostd``."""

import sys

from hostd.cli import main

sys.exit(main())
