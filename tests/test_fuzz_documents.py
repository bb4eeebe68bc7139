"""Property-based harnesses over the parsers of strangers' documents (issue 31): a bounded budget for CI.

The property, for each document kind: whatever the document, the parser
returns, or raises that document's named error (a :class:`HostError` of its
kind); never another exception. For the converters, also: what they accept
is a manifest hostd then loads (:func:`hostd.install.generated.manifest_errors` is
empty). The properties live in :mod:`fuzz.targets`, shared with the
coverage-guided runner for long campaigns (``python -m fuzz``, ``fuzz/README.md``).
Documents are drawn from JSON-shaped values with hostile text (NUL, lone
surrogates, control characters, long strings), deep nesting, and byte mutations
of valid documents.

Budget: ``max_examples=200`` per harness, no deadline, derandomized (the same
examples every run, so CI is stable); a long campaign by hand:
``HYPOTHESIS_PROFILE=campaign`` raises the budget (10,000 per harness, random).
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz import targets
from tests.test_bundle import mcpb_manifest

settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("campaign", max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BUDGET = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: Text as strangers send it: any code point, surrogates included, NULs and control characters likely.
HOSTILE_TEXT = st.one_of(
    st.text(max_size=20),
    st.text(st.characters(codec=None, categories=None), max_size=12),
    st.sampled_from(["", "\x00", "a\x00b", "\ud800", "x\udfff", " ", "A B", "${secret:X}", "${data}/x", "../x"]),
    st.text(st.sampled_from("aZ_-. /\\:\x00\n"), max_size=300),
)


def json_values(leaf: st.SearchStrategy[Any] = HOSTILE_TEXT) -> st.SearchStrategy[Any]:
    scalars = st.one_of(leaf, st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False))
    return st.recursive(
        scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(HOSTILE_TEXT, inner, max_size=4)),
        max_leaves=20,
    )


@st.composite
def deep_values(draw: st.DrawFn) -> Any:
    """A value nested 60 to 1100 levels: around the bound, and past every recursion limit."""
    value: Any = draw(HOSTILE_TEXT)
    for _ in range(draw(st.sampled_from([60, 63, 64, 65, 300, 1100]))):
        value = [value] if draw(st.booleans()) else {"k": value}
    return value


@st.composite
def mutated(draw: st.DrawFn, base: bytes) -> bytes:
    """``base`` with a few bytes flipped, inserted, deleted or a slice repeated."""
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 6))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        kind = draw(st.sampled_from(["flip", "insert", "delete", "repeat"]))
        if kind == "flip":
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        else:
            data[at:at] = data[at : at + draw(st.integers(1, 16))] * draw(st.integers(2, 50))
    return bytes(data)


def encoded(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True)  # ensure_ascii: a lone surrogate becomes a \\ud800 escape


# -- the manifest loader ------------------------------------------------------------------------

VALID_MANIFEST = {
    "id": "fuzz",
    "name": "Fuzz",
    "version": "1.0.0",
    "description": "d",
    "permissions": ["fuzz.use"],
    "contributes": {"tools": [{"name": "t", "permission": "fuzz.use"}]},
    "backend": {"type": "mcp", "transport": "stdio", "command": "python3", "args": ["server.py"]},
}


@st.composite
def manifest_texts(draw: st.DrawFn) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(["field", "deep", "mutated", "yaml"]))
    if kind == "field":
        document: dict[str, Any] = json.loads(json.dumps(VALID_MANIFEST))
        section = draw(st.sampled_from([document, document["backend"], document["contributes"]]))
        section[draw(st.sampled_from([*section, "extra"]))] = draw(json_values())
        return "plugin.json", encoded(document).encode()
    if kind == "deep":
        return "plugin.json", encoded({**VALID_MANIFEST, "description": draw(deep_values())}).encode()
    if kind == "mutated":
        return "plugin.json", draw(mutated(json.dumps(VALID_MANIFEST, indent=1).encode()))
    return "plugin.yaml", draw(mutated(b"id: fuzz\nname: Fuzz\nversion: 1.0.0\nbackend: {type: mcp}\n"))


@BUDGET
@given(manifest_texts())
def test_the_manifest_loader_answers_manifest_invalid_or_loads(case: tuple[str, bytes]) -> None:
    name, data = case
    with tempfile.TemporaryDirectory() as folder:
        targets.check_manifest_file(name, data, Path(folder))


# -- the import converter ----------------------------------------------------------------------

SERVER_FIELDS = ["command", "args", "env", "url", "serverUrl", "type", "headers", "cwd"]


@st.composite
def configs(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["object", "text", "deep", "mutated"]))
    servers: dict[str, Any] = {}
    for _ in range(draw(st.integers(0, 3))):
        server: dict[str, Any] = {"command": "python3"} if draw(st.booleans()) else {"url": "https://e.com/mcp"}
        for field in draw(st.lists(st.sampled_from(SERVER_FIELDS), max_size=3)):
            server[field] = draw(
                st.one_of(
                    json_values(),
                    st.lists(HOSTILE_TEXT, max_size=4),
                    st.dictionaries(HOSTILE_TEXT, HOSTILE_TEXT, max_size=3),
                )
            )
        servers[draw(HOSTILE_TEXT)] = server
    config = {draw(st.sampled_from(["mcpServers", "servers"])): servers}
    if kind == "object":
        return config
    if kind == "text":
        return encoded(config)
    if kind == "deep":
        return {"mcpServers": {"x": {"command": "python3", "url": draw(deep_values())}}}
    return draw(mutated(encoded(config).encode())).decode("utf-8", "replace")


@BUDGET
@given(configs())
def test_the_import_converter_answers_config_error_or_manifests_hostd_loads(config: Any) -> None:
    targets.check_import(config)


# -- the registry converter --------------------------------------------------------------------

BASE_ENTRY: dict[str, Any] = {
    "name": "io.github.fuzz/thing",
    "description": "d",
    "version": "1.0.0",
    "packages": [
        {
            "registryType": "npm",
            "identifier": "thing",
            "version": "1.0.0",
            "transport": {"type": "stdio"},
            "packageArguments": [{"type": "positional", "value": "x"}],
            "environmentVariables": [{"name": "V", "value": "1"}],
        }
    ],
    "remotes": [{"type": "streamable-http", "url": "https://e.com/mcp", "headers": [{"name": "H", "value": "v"}]}],
}


@st.composite
def registry_entries(draw: st.DrawFn) -> tuple[Any, int]:
    document: dict[str, Any] = json.loads(json.dumps(BASE_ENTRY))
    if draw(st.booleans()):
        document["packages"] = []
    package = document["packages"][0] if document["packages"] else document
    targets = [document, document["remotes"][0], document["remotes"][0]["headers"][0]]
    if document["packages"]:
        targets += [package, package["packageArguments"][0], package["environmentVariables"][0]]
    for _ in range(draw(st.integers(1, 3))):
        target = draw(st.sampled_from(targets))
        target[draw(st.sampled_from([*target, "extra"]))] = draw(st.one_of(json_values(), deep_values()))
    kind = draw(st.sampled_from(["object", "text", "mutated"]))
    if kind == "object":
        return document, 0
    text = encoded(document)
    return (text if kind == "text" else draw(mutated(text.encode())).decode("utf-8", "replace")), 0


@BUDGET
@given(registry_entries())
def test_the_registry_converter_answers_package_invalid_or_manifests_hostd_loads(case: tuple[Any, int]) -> None:
    targets.check_serverjson(*case)


# -- the bundle reader -------------------------------------------------------------------------


def archive(manifest: Any, files: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as out:
        out.writestr("manifest.json", manifest if isinstance(manifest, str) else encoded(manifest))
        for name, data in files.items():
            out.writestr(name, data)
    return buffer.getvalue()


VALID_BUNDLE = archive(mcpb_manifest(), {"server/index.js": b"// the server\n" * 20})


@st.composite
def bundles(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["mutated", "manifest", "deep", "names", "methods"]))
    if kind == "mutated":
        return draw(mutated(VALID_BUNDLE))
    if kind == "manifest":
        manifest = mcpb_manifest()
        section = draw(st.sampled_from([manifest, manifest["server"], manifest["server"]["mcp_config"]]))
        section[draw(st.sampled_from([*section, "extra"]))] = draw(json_values())
        return archive(manifest, {"server/index.js": b""})
    if kind == "deep":
        return archive({**mcpb_manifest(), "description": draw(deep_values())}, {"server/index.js": b""})
    if kind == "names":
        # zipfile cuts a name at a NUL (and cannot write an empty one): what is before it must be a name.
        name = draw(
            st.text(st.sampled_from("ab/.\\:\x00" + "x" * 5), min_size=1, max_size=300).filter(
                lambda n: n.split("\x00")[0] not in ("", "manifest.json", "server/index.js")
            )
        )
        return archive(mcpb_manifest(), {"server/index.js": b"", name: b"x"})
    method = draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA]))
    return draw(mutated(archive(mcpb_manifest(), {"server/index.js": b"x" * 500}, method)))


@BUDGET
@given(bundles())
def test_the_bundle_reader_answers_package_invalid_or_installs(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as root:
        targets.check_bundle(data, Path(root))
