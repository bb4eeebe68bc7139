"""Every saved crasher (``fuzz/crashers/<target>/<name>``) replayed through its target's property (issue 31).

A crasher is an input that once broke a target of ``python -m fuzz``; its root was fixed in hostd and it stays
here, run by the same function the fuzzer ran (:data:`fuzz.targets.TARGETS`), so the class cannot come back
unnoticed. Folders are per target; a folder's README or other dotfiles are not inputs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzz.targets import TARGETS

CRASHERS = Path(__file__).resolve().parent.parent / "fuzz" / "crashers"


def crashers() -> list[Path]:
    return sorted(
        path
        for path in CRASHERS.glob("*/*")
        if path.is_file() and not path.name.startswith(".") and path.name != "README.md"
    )


def test_every_crasher_folder_is_a_target() -> None:
    folders = {path.name for path in CRASHERS.iterdir() if path.is_dir()}
    assert folders <= set(TARGETS), sorted(folders - set(TARGETS))


def test_the_replay_ran_every_file_found() -> None:
    """Each saved crasher now holds its target's property; each file under fuzz/crashers/ (at any depth, the README
    aside) is one the replay ran: none is skipped."""
    found = [path for path in CRASHERS.rglob("*") if path.is_file() and path.name != "README.md"]
    ran = 0
    for path in crashers():
        try:
            TARGETS[path.parent.name].run(path.read_bytes())
        except BaseException as exc:
            exc.add_note(f"replaying {path.relative_to(CRASHERS)}")
            raise
        ran += 1
    assert ran == len(found), sorted(set(found) - set(crashers()))


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_the_seed_corpus_holds_its_property(target: str) -> None:
    """The committed seeds (fuzz/corpus/<target>/, the repository's own documents) pass, and there are some."""
    seeds = sorted((CRASHERS.parent / "corpus" / target).iterdir())
    assert seeds
    for path in seeds:
        TARGETS[target].run(path.read_bytes())
