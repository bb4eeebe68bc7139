"""hostd's import layers (docs/architecture.md): every import points down the layers, none across or up, and no
two modules import each other, directly or around a circle.

Every import counts: at module level, inside a function (a deferred import), under ``if TYPE_CHECKING:``, and a
module loaded by name (``lazy.load("hostd.x", ...)``, ``importlib.import_module("hostd.x")``). The class of
defect: *a dependency that points up, hidden where an import-time circle would not show it* (a deferred or
type-only import works at run time and still ties the layers together: the lower one can no longer be read,
tested or changed without the upper one). The check reads the source with :mod:`ast`; it imports nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: hostd's packages, bottom first. A package may import the packages of the layers below its own; the packages
#: of one layer do not import each other. ``hostd`` itself is its ``__init__`` (``__version__``) only.
LAYERS: list[set[str]] = [
    {"hostd"},
    {"hostd.wire"},
    {"hostd.storage", "hostd.net"},
    {"hostd.control", "hostd.remote"},
    {"hostd.mcp", "hostd.install"},
    {"hostd.plugins"},
    {"hostd.host"},
    {"hostd.gateway"},
    {"hostd.cli"},
]
#: The stable public surface (docs/architecture.md "Public surface"): re-exports for a parent application or a
#: plugin author, above every layer; nothing in hostd imports them.
PUBLIC = {"hostd.client", "hostd.manifest", "hostd.__main__"}
#: Calls whose first argument, a string, names a module they import.
LOADERS = {"load", "load_async", "import_module", "__import__"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources(*packages: str) -> dict[str, Path]:
    return {module_name(p): p for package in packages for p in sorted((ROOT / package).rglob("*.py"))}


def imported(path: Path, name: str, known: set[str]) -> Iterator[tuple[str, int]]:
    """``(module, line)`` for every module ``path`` (module ``name``) imports, anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield (full if full in known else base), node.lineno
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            first = node.args[0]
            if called in LOADERS and isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield first.value, node.lineno


def graph() -> dict[str, dict[str, int]]:
    """hostd's own import graph: module -> {imported hostd module: first line}."""
    modules = sources("hostd")
    known = set(modules)
    edges: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        targets = edges.setdefault(name, {})
        for found, line in imported(path, name, known):
            # A name that is not a module (``hostd.x.y.Name``) counts as its module's.
            target = found
            while target not in known and "." in target:
                target = target.rpartition(".")[0]
            if target in known and target != name and (target.startswith("hostd.") or target == "hostd"):
                targets.setdefault(target, line)
    return edges


def package_of(module: str) -> str:
    if module in PUBLIC or module == "hostd":
        return module
    return ".".join(module.split(".")[:2])


def layer_of(package: str) -> int | None:
    if package in PUBLIC:
        return len(LAYERS)
    return next((i for i, layer in enumerate(LAYERS) if package in layer), None)


def test_every_module_is_in_a_layer() -> None:
    homeless = sorted(m for m in graph() if layer_of(package_of(m)) is None)
    assert homeless == [], f"modules in no layer (move them into a package of LAYERS): {homeless}"


def test_every_import_points_down() -> None:
    wrong = []
    for module, targets in sorted(graph().items()):
        own = package_of(module)
        for target, line in sorted(targets.items()):
            other = package_of(target)
            if other == own:
                continue
            mine, theirs = layer_of(own), layer_of(other)
            if mine is None or theirs is None or theirs >= mine or other in PUBLIC:
                wrong.append(f"{module}:{line} imports {target} ({own} -> {other})")
    assert wrong == [], "imports that do not point down the layers:\n" + "\n".join(wrong)


def test_no_circles() -> None:
    """Tarjan's strongly connected components of the module graph: every one of them a single module."""
    edges = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    assert circles == [], f"import circles (deferred and TYPE_CHECKING imports count): {circles}"


def test_modules_loaded_by_name_exist() -> None:
    """A module loaded by name (``lazy.load("hostd.x")``, ``import_module``) is one that exists: a name the
    moves left behind would fail only at the first request that needs it."""
    modules = sources("hostd")
    missing = []
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            target = node.args[0].value
            if called in LOADERS and isinstance(target, str) and target.startswith("hostd") and target not in modules:
                missing.append(f"{name}:{node.lineno} loads {target}")
    assert missing == []
    assert {"hostd.mcp.transport.http", "hostd.mcp.handshake", "hostd.host.service"} <= set(modules)


def test_sandbox_stands_alone() -> None:
    """sandbox/ is importable without hostd (sandbox/README.md): it imports nothing of hostd or docgen."""
    wrong = [
        f"{name}:{line} imports {target}"
        for name, path in sources("sandbox").items()
        for target, line in imported(path, name, set())
        if target.split(".")[0] in {"hostd", "docgen"}
    ]
    assert wrong == []


def test_nothing_in_hostd_imports_docgen() -> None:
    wrong = [
        f"{name}:{line} imports {target}"
        for name, path in sources("hostd").items()
        for target, line in imported(path, name, set())
        if target.split(".")[0] == "docgen"
    ]
    assert wrong == []


def test_every_package_says_what_it_holds_and_may_import() -> None:
    """Each package of LAYERS has an ``__init__`` docstring of one paragraph naming what it may import."""
    missing = []
    for layer in LAYERS:
        for package in sorted(layer - {"hostd"}):
            init = ROOT / package.replace(".", "/") / "__init__.py"
            doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) if init.exists() else None
            if doc is None or "\n\n" in doc.strip() or "May import" not in " ".join(doc.split()):
                missing.append(package)
    assert missing == [], f"packages without a one-paragraph docstring saying what they may import: {missing}"


def test_the_check_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The parser finds a module-level, a deferred, a TYPE_CHECKING, a relative and a by-name import."""
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import hostd.wire.errors\n"
        "from hostd.storage import state\n"
        "if TYPE_CHECKING:\n"
        "    from hostd.host.service import Host\n"
        "def f():\n"
        "    from hostd.mcp import link\n"
        "    from . import lifecycle\n"
        "    return lazy.load('hostd.mcp.transport.http', 'x')\n",
        encoding="utf-8",
    )
    known = {"hostd.storage.state", "hostd.mcp.link", "hostd.plugins.lifecycle"}
    found = {target for target, _ in imported(source, "hostd.plugins.probe", known)}
    assert found == {
        "typing",
        "hostd.wire.errors",
        "hostd.storage.state",
        "hostd.host.service",
        "hostd.mcp.link",
        "hostd.plugins.lifecycle",
        "hostd.mcp.transport.http",
    }
