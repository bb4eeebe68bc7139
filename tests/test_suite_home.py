"""The suite's own footprint: nothing written outside the repository and the temporary folder (issue 28)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def test_the_suite_runs_with_a_temporary_home() -> None:
    """Issue 28: the suite writes nothing into the user's HOME (npm's, uv's and hostd's caches included):
    conftest's ``pytest_configure`` points HOME at a folder of the temporary directory and drops the
    variables that would point programs back at the user's folders."""
    home = Path(os.environ["HOME"]).resolve()
    assert home.is_relative_to(Path(tempfile.gettempdir()).resolve())
    assert home.name.startswith("hostd-tests-home-")
    assert Path.home().resolve() == home
    for name in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "npm_config_cache"):
        assert name not in os.environ
