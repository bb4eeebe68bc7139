"""The sidecar build says what it is doing (issue 28, item 10): packaging/build_sidecar.py's report of PyInstaller.

The class: a long build step that prints nothing, then warnings nothing explains. ``report`` reads
PyInstaller's INFO log as it comes: each phase is named once, when it starts; a warning known to be
harmless (``HARMLESS``, explained in docs/sidecar.md "Build output") is counted, any other printed.
The lines below are PyInstaller 6's own, from a build of this repository.
"""

from __future__ import annotations

import io
import re
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "packaging"))
from build_sidecar import HARMLESS, report  # type: ignore[import-not-found]

sys.path.pop(0)

LOG = """\
11661 INFO: Analyzing modules for base_library.zip ...
92389 INFO: Analyzing /work/hostd/packaging/sidecar_main.py
415507 INFO: Analyzing hidden import 'hostd.__main__'
415766 INFO: Analyzing hidden import 'hostd.cli.client'
500000 INFO: Processing module hooks (post-graph stage)...
579142 WARNING: Hidden import "pycparser.lextab" not found!
579142 WARNING: Hidden import "pycparser.yacctab" not found!
619182 WARNING: Hidden import "setuptools._distutils" not found!
619669 WARNING: Library ole32 required via ctypes not found
619767 WARNING: Library shell32 required via ctypes not found
619800 WARNING: Hidden import "hostd.plugins.missing" not found!
621072 INFO: Looking for dynamic libraries
628832 INFO: Building PYZ (ZlibArchive) /work/hostd/build/sidecar/PYZ-00.pyz
628900 INFO: Building PYZ (ZlibArchive) /work/hostd/build/sidecar/PYZ-00.pyz completed successfully.
641637 INFO: Building PKG (CArchive) hostd-x86_64-unknown-linux-gnu.pkg
641734 INFO: Building EXE from EXE-00.toc
641800 INFO: Building COLLECT COLLECT-00.toc
"""


def test_each_phase_is_named_once_and_only_unknown_warnings_are_printed(capsys: pytest.CaptureFixture[str]) -> None:
    kept = io.StringIO()
    tail = report(LOG.splitlines(keepends=True), kept, time.monotonic())
    assert kept.getvalue() == LOG  # the whole log is kept
    assert tail == LOG.splitlines(keepends=True)[-40:]
    printed = [re.sub(r"^build_sidecar: +\d+ s  ", "", line) for line in capsys.readouterr().err.splitlines()]
    assert printed == [
        "analysing the standard library",
        "analysing hostd's imports (packaging/sidecar_main.py and everything it imports)",
        "analysing the modules loaded by name (all of hostd and sandbox)",
        "running PyInstaller's hooks for the packages found",
        'build_sidecar: PyInstaller warning: Hidden import "hostd.plugins.missing" not found!',
        "finding the shared libraries the modules load",
        "compressing the Python modules into the archive",
        "building the bootloader's package",
        "building the executable",
        "collecting the folder (runtime, dependencies, the shim's files)",
        'build_sidecar: 5 known harmless PyInstaller warnings left out (docs/sidecar.md, "Build output")',
    ]


def test_every_harmless_warning_is_explained_in_the_docs() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "sidecar.md").read_text()
    section = doc.split("## Build output", 1)[1].split("\n## ", 1)[0]
    missing = [
        pattern.pattern
        for pattern, _why in HARMLESS
        if pattern.pattern.strip("^$").split("(")[0].replace("\\", "").split('"')[0].strip() not in section
    ]
    assert (len(HARMLESS), missing) == (3, [])
