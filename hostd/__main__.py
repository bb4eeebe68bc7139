"""``python -m hostd`` is ``hostd``; the process ends as Python's own exit would, without its teardown
(:func:`hostd.cli.hostd.end_process`)."""

from hostd.cli.hostd import end_process, main

end_process(main())
