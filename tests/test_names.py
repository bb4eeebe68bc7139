"""One name, one class: no two classes in hostd share a name.

The class of defect: *two classes of one name in different modules* (a wire model and the internal value it is
made from, the MCP spec's result and hostd's own answer of the same method, a client's and a session's
``Notification``). Each reads right where it is defined and wrong everywhere else: an import of the wrong one
type-checks wherever the fields happen to agree, ``grep 'class X'`` finds two, and a docstring's ``X`` points at
either. Every class counts, public or private, at module level or nested, in every module of hostd. The check reads
the source with :mod:`ast`; it imports nothing.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def classes(source: str) -> list[tuple[str, int]]:
    """``(name, line)`` of every class defined in ``source``, nested ones too."""
    return [(node.name, node.lineno) for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ClassDef)]


def shared_names(files: dict[str, str]) -> dict[str, list[str]]:
    """Class name -> ``["path:line", ...]`` for each name defined more than once across ``files`` (path -> source)."""
    where: dict[str, list[str]] = defaultdict(list)
    for path, source in sorted(files.items()):
        for name, line in classes(source):
            where[name].append(f"{path}:{line}")
    return {name: places for name, places in where.items() if len(places) > 1}


def test_no_two_classes_in_hostd_share_a_name() -> None:
    files = {
        str(path.relative_to(ROOT)): path.read_text(encoding="utf-8") for path in sorted((ROOT / "hostd").rglob("*.py"))
    }
    assert len(files) > 50
    assert shared_names(files) == {}


def test_the_check_finds_each_kind_of_shared_name() -> None:
    """The check is not vacuous: a public pair, a private pair, a nested class and a pair within one module."""
    files = {
        "a.py": "class Tool:\n    pass\nclass _Pending:\n    pass\nclass Outer:\n    class Inner:\n        pass\n",
        "b.py": "class Tool:\n    pass\n",
        "c.py": "def f():\n    class _Pending:\n        pass\nclass Inner:\n    pass\n",
        "d.py": "class Twice:\n    pass\nif True:\n    class Twice:\n        pass\n",
        "e.py": "class Unique:\n    pass\nTool = 1\n",
    }
    assert shared_names(files) == {
        "Tool": ["a.py:1", "b.py:1"],
        "_Pending": ["a.py:3", "c.py:2"],
        "Inner": ["a.py:6", "c.py:4"],
        "Twice": ["d.py:1", "d.py:4"],
    }
