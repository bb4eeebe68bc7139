"""hostd fuzzes itself: coverage-guided harnesses (atheris) over the parsers of strangers' documents (issue 31).

``python -m fuzz --list`` lists the targets; ``python -m fuzz <target> [-runs=N] [corpus dirs...]`` runs one
(libFuzzer's options pass through). The targets and their property: :mod:`fuzz.targets`; how to run a campaign
and the last campaign's numbers: ``fuzz/README.md``.
"""
