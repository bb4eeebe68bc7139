"""``python -m hostd`` is ``hostd``; the process ends as Python's own exit would, without its teardown
(:func:`hostd.cli.hostd.end_process`)."""

from hostd.cli.hostd import run

run()
