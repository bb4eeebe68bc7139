"""``python -m fuzz``: run one target under atheris (libFuzzer), or list them.

    python -m fuzz --list
    python -m fuzz <target> [libFuzzer options, e.g. -runs=1000000 -max_len=65536] [corpus dirs...]
    python -m fuzz --seed          # (re)write fuzz/corpus/<target>/ from the repository's documents

With no corpus folder given, the target's committed seeds (``fuzz/corpus/<target>/``) are used, read-only: new
inputs go to a fresh temporary folder (named on stderr), so a campaign never grows the committed corpus.
Crashes are written by libFuzzer as ``crash-<sha1>`` in the current folder (``-artifact_prefix=`` moves them);
minimise one with ``-minimize_crash=1 -runs=10000 <file>`` and save it under ``fuzz/crashers/<target>/``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    if argv[0] == "--seed":
        from fuzz import seeds  # noqa: PLC0415

        seeds.write_all(HERE / "corpus")
        return 0
    if argv[0] == "--list":
        from fuzz.targets import TARGETS  # noqa: PLC0415

        for target in TARGETS.values():
            print(f"{target.name:15} {target.about}")
        return 0
    import atheris  # noqa: PLC0415 (the optional extra "fuzz"; only the runner needs it)

    name, options = argv[0], argv[1:]
    # hostd's modules, imported here, are instrumented for coverage (and those the first runs import lazily).
    with atheris.instrument_imports(include=["hostd"]):
        from fuzz.targets import TARGETS  # noqa: PLC0415

        if name not in TARGETS:
            print(f"no target {name!r}; python -m fuzz --list", file=sys.stderr)
            return 2
        run = TARGETS[name].run
        seed_folder = HERE / "corpus" / name
        for seed in sorted(seed_folder.iterdir()) if seed_folder.is_dir() else []:
            run(seed.read_bytes())  # the seeds pass, and lazy imports happen inside the instrumentation
    if not [option for option in options if not option.startswith("-")]:
        scratch = tempfile.mkdtemp(prefix=f"hostd-fuzz-{name}-")
        print(f"corpus: new inputs in {scratch}, seeds from {seed_folder}", file=sys.stderr)
        options = [*options, scratch, str(seed_folder)]
    atheris.Setup([f"fuzz-{name}", *options], run)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
