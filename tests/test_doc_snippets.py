"""Every code snippet in README.md and docs/*.md is checked, or marked as an excerpt (issue 28, item 6).

The class: a snippet the docs show that does not work as shown (the README's TypeScript example
passed no ``env`` and used an undefined ``controller``, so it did not type-check). Each fenced block
is extracted and checked by its language:

- ``ts``: type-checked by the TypeScript client's own ``tsc`` (strict, against ``clients/typescript/src``
  as ``@hostd/client``); ``js``: ``node --check``;
- ``python``/``py``: compiled and type-checked with mypy (strict);
- ``sh``/``console``: ``bash -n`` (``console``: the lines after ``$ ``), and every ``hostctl VERB`` a
  command names is one of hostctl's verbs;
- ``json``: parsed; ``jsonc``: parsed as JSON5 (comments allowed), whole or one message per line
  (``→``/``←`` transcripts); ``yaml``: parsed;
- a block inside a generated example (``<!-- example:NAME:begin -->``) is captured from a live
  hostd by ``python -m docgen.docs`` and checked by tests/test_docs.py.

Anything else (a diagram, a command-line synopsis, a transcript with ``…`` for fields left out) is
marked on the line before its fence with ``<!-- snippet: excerpt (why) -->``; an unmarked block that
cannot be checked fails here, naming it, so none is skipped silently.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyjson5
import pytest
import yaml

from tests.test_typescript_client import PACKAGE, node_binary

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARKER = re.compile(r"^<!-- snippet: excerpt \(.+\) -->$")
CHECKED = {"ts", "js", "python", "py", "sh", "console", "json", "jsonc", "yaml"}


@dataclass(frozen=True)
class Snippet:
    """One fenced block: where it is, its language, its text, and how the docs mark it."""

    path: Path
    line: int
    language: str
    text: str
    marked: bool
    generated: bool

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line} ({self.language or 'no language'})"


def snippets(path: Path) -> list[Snippet]:
    """The fenced blocks of ``path``, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Snippet] = []
    generated = False
    index = 0
    while index < len(lines):
        line = lines[index]
        if re.match(r"<!-- example:[\w-]+:begin -->", line.strip()):
            generated = True
        elif re.match(r"<!-- example:[\w-]+:end -->", line.strip()):
            generated = False
        fence = _FENCE.match(line)
        if fence is None:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == "```")
        before = next((lines[i].strip() for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        text = "\n".join(row[len(fence.group(1)) :] for row in lines[index + 1 : end])
        found.append(Snippet(path, index + 1, fence.group(2), text, MARKER.match(before) is not None, generated))
        index = end + 1
    return found


ALL = [snippet for path in DOCS for snippet in snippets(path)]


def test_every_snippet_is_checked_or_marked_as_an_excerpt() -> None:
    unmarked = [s.where for s in ALL if not s.marked and not s.generated and s.language not in CHECKED]
    assert unmarked == [], "mark each with <!-- snippet: excerpt (why) --> on the line before its fence"
    # A marker that marks nothing a check would take is a check skipped: the marked ones fail their check.
    for snippet in ALL:
        if snippet.marked and snippet.language in CHECKED and snippet.language not in ("ts", "js", "python", "py"):
            assert check_failure(snippet) is not None, f"{snippet.where} is marked as an excerpt but passes its check"


def _hostctl_verbs() -> set[str]:
    from hostd.cli.hostctl import build_parser  # noqa: PLC0415 - only this test needs it

    parser = build_parser()
    actions = [a for a in parser._actions if getattr(a, "choices", None)]
    return {str(choice) for action in actions for choice in action.choices or ()}


def check_failure(snippet: Snippet) -> str | None:
    """Why ``snippet`` fails its language's data or shell check, or ``None`` (ts, js and python: see below)."""
    text = snippet.text
    if snippet.language == "json":
        try:
            json.loads(text)
        except ValueError as exc:
            return str(exc)
        return None
    if snippet.language == "jsonc":
        return _jsonc_failure(text)
    if snippet.language == "yaml":
        try:
            yaml.safe_load(text)
        except yaml.YAMLError as exc:
            return str(exc)
        return None
    if snippet.language in ("sh", "console"):
        script = (
            text
            if snippet.language == "sh"
            else "\n".join(line[2:] for line in text.splitlines() if line.startswith("$ "))
        )
        done = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return done.stderr
        verbs = _hostctl_verbs()
        unknown = [v for v in re.findall(r"hostctl\s+([a-z][\w-]*)", script) if v not in verbs]
        return f"hostctl has no verb {unknown}" if unknown else None
    return None


def _jsonc_failure(text: str) -> str | None:
    try:
        pyjson5.decode(text)
        return None
    except pyjson5.Json5Exception:
        pass
    for line in text.splitlines():
        message = re.sub(r"^\s*[→←]\s*", "", line).strip()
        if not message or message.startswith("//"):
            continue
        try:
            pyjson5.decode(message)
        except pyjson5.Json5Exception as exc:
            return f"{line!r}: {exc}"
    return None


@pytest.mark.parametrize(
    "snippet",
    [s for s in ALL if not s.marked and not s.generated and s.language in CHECKED - {"ts", "js", "python", "py"}],
    ids=lambda s: s.where,
)
def test_data_and_shell_snippets(snippet: Snippet) -> None:
    assert check_failure(snippet) is None


def test_python_snippets_type_check(tmp_path: Path) -> None:
    """Each ``python`` snippet compiles and passes ``mypy --strict`` (none today; one added is checked)."""
    failures = []
    for index, snippet in enumerate(s for s in ALL if s.language in ("python", "py") and not s.marked):
        compile(snippet.text, snippet.where, "exec")
        source = tmp_path / f"snippet{index}.py"
        source.write_text(snippet.text + "\n")
        done = subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", os.devnull, str(source)],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        if done.returncode != 0:
            failures.append(f"{snippet.where}: {done.stdout}")
    assert failures == []


def test_javascript_snippets_parse(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    javascript = [s for s in ALL if s.language == "js" and not s.marked]
    assert javascript, "docs/protocol.md's Node client is gone"
    failures = []
    for index, snippet in enumerate(javascript):
        source = tmp_path / f"snippet{index}.cjs"
        source.write_text(snippet.text + "\n")
        done = subprocess.run([node, "--check", str(source)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            failures.append(f"{snippet.where}: {done.stderr}")
    assert failures == []


def test_typescript_snippets_type_check(tmp_path: Path) -> None:
    """Each ``ts`` snippet, as a module of its own, type-checks with the client's tsc and compiler options
    (strict, ``exactOptionalPropertyTypes``), ``@hostd/client`` being ``clients/typescript/src``."""
    typescript = [s for s in ALL if s.language == "ts" and not s.marked]
    assert typescript, "the README's TypeScript example is gone"
    node = node_binary()
    options = json.loads((PACKAGE / "tsconfig.json").read_text())["compilerOptions"]
    options.pop("rootDir", None)
    options.update(
        module="ESNext",
        moduleResolution="Bundler",
        noEmit=True,
        typeRoots=[str(PACKAGE / "node_modules" / "@types")],
        paths={"@hostd/client": [str(PACKAGE / "src" / "index.ts")]},
    )
    files = []
    for index, snippet in enumerate(typescript):
        source = tmp_path / f"snippet{index}.ts"
        source.write_text(f"// {snippet.where}\n{snippet.text}\nexport {{}};\n")
        files.append(str(source))
    (tmp_path / "tsconfig.json").write_text(json.dumps({"compilerOptions": options, "files": files}))
    tsc = PACKAGE / "node_modules" / "typescript" / "bin" / "tsc"
    done = subprocess.run(
        [node, str(tsc), "-p", str(tmp_path / "tsconfig.json")],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
