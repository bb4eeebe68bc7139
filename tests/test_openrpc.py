"""docs/openrpc.json: generated from hostd.control.models's registry, valid OpenRPC, served by rpc.discover.

The class of bug: a description of the protocol written beside the code drifts from it (a method added
without its entry, a field renamed in a model but not in the description, a client generated from a
stale document). Every member is caught here: the document is regenerated and compared, every served
method must be in the registry, and the document is validated against the OpenRPC meta-schema, vendored
from the npm packages @open-rpc/meta-schema 1.14.9 and @json-schema-tools/meta-schema 1.8.0 (Apache-2.0,
tests/data/openrpc/LICENSE-*.md), so no network is needed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry
from referencing.jsonschema import DRAFT7

from docgen import docs
from hostd.cli.client import HostdClient
from hostd.control import models as p
from hostd.control import openrpc
from hostd.control import params as wire_params
from hostd.host.service import Host
from hostd.wire.errors import ErrorKind

DATA = Path(__file__).resolve().parent / "data" / "openrpc"
OPENRPC_DOC = Path(__file__).resolve().parent.parent / "docs" / "openrpc.json"
CONTROL_REQUESTS = {"initialize", "ping", "shutdown"}
CONTROL_NOTIFICATIONS = {"initialized", "$/cancelRequest", "exit"}


def problems(document: Any) -> list[str]:
    """What the vendored OpenRPC meta-schema (JSON Schema draft-07 rules) finds wrong in ``document``, each
    as ``<path>: <message>``; empty for a valid document."""
    return [f"{error.json_path}: {error.message}" for error in _validator().iter_errors(document)]


def validate(document: Any) -> None:
    """Validate ``document`` against the vendored OpenRPC meta-schema: raises jsonschema.ValidationError."""
    _validator().validate(document)


def _validator() -> jsonschema.Draft7Validator:
    meta = json.loads((DATA / "meta-schema.json").read_text(encoding="utf-8"))
    tools = json.loads((DATA / "json-schema-tools-meta-schema.json").read_text(encoding="utf-8"))
    registry: Registry[Any] = Registry().with_resources(
        [
            ("https://meta.open-rpc.org/", DRAFT7.create_resource(meta)),
            ("https://meta.json-schema.tools", DRAFT7.create_resource(tools)),
            ("https://meta.json-schema.tools/", DRAFT7.create_resource(tools)),
        ]
    )
    return jsonschema.Draft7Validator(meta, registry=registry)


def test_document_on_disk_is_fresh() -> None:
    assert OPENRPC_DOC.read_text(encoding="utf-8") == openrpc.document_text(), (
        "docs/openrpc.json is stale; regenerate it with: python -m docgen.docs"
    )


def test_document_is_valid_openrpc() -> None:
    document = json.loads(OPENRPC_DOC.read_text(encoding="utf-8"))
    assert problems(document) == []
    assert len(document["methods"]) > 0  # the document checked is the real one, not an empty shell


@pytest.mark.parametrize(
    "breakage",
    [
        lambda d: d.pop("info"),
        lambda d: d.update(openrpc="9.9.9"),
        lambda d: d["methods"][0].pop("params"),
        lambda d: d["methods"][0].update(paramStructure="sideways"),
        lambda d: d["components"]["errors"]["TOOL_NOT_FOUND"].update(code="x"),
    ],
    ids=["no-info", "bad-version", "no-params", "bad-param-structure", "bad-error-code"],
)
def test_the_validator_rejects_broken_documents(breakage: Any) -> None:
    """The meta-schema check is not vacuous: each of these breaks the document and is caught."""
    document = openrpc.document()
    breakage(document)
    with pytest.raises(jsonschema.ValidationError):
        validate(document)


def test_every_served_method_is_in_the_registry() -> None:
    methods = {m["name"]: m for m in openrpc.document()["methods"]}
    served = set(Host.METHODS) | CONTROL_REQUESTS
    assert served == set(p.PARAMS) == set(p.RESULTS), (
        "every method Host.METHODS or hostd.control.server serves needs its params model in "
        "hostd.control.models.PARAMS "
        "and its result in hostd.control.models.RESULTS"
    )
    assert {n for n, m in methods.items() if m["x-direction"] == "request"} == served
    assert {n for n, m in methods.items() if m["x-direction"] == "notification"} == set(p.NOTIFICATIONS)
    assert {n for n, m in methods.items() if m["x-direction"] == "parent-notification"} == CONTROL_NOTIFICATIONS
    assert {n for n, m in methods.items() if m["x-direction"] == "parent-request"} == set(
        getattr(p, "PARENT_REQUESTS", {})
    )


def test_params_results_and_errors_are_exact() -> None:
    document = openrpc.document()
    methods = {m["name"]: m for m in document["methods"]}
    grant = methods["plugins/grant"]
    assert [(d["name"], d["required"]) for d in grant["params"]] == [
        ("id", True),
        ("permissions", True),
        ("networkPorts", False),
        ("limits", False),
        ("folders", False),
        ("secretArguments", False),
        ("networkHosts", False),
        ("networkCallHosts", False),
    ]
    assert grant["result"]["schema"] == {"$ref": "#/components/schemas/PluginInfo"}
    assert methods["shutdown"]["result"]["schema"] == {"type": "null"}
    assert "result" not in methods["$/progress"]
    assert [d["name"] for d in methods["$/progress"]["params"]] == ["requestId", "progress", "total", "message"]
    call_errors = [e["$ref"].rsplit("/", 1)[1] for e in methods["tools/call"]["errors"]]
    assert "REQUEST_CANCELLED" in call_errors and "TOOL_TIMEOUT" in call_errors
    errors = document["components"]["errors"]
    assert set(errors) == {kind.name for kind in ErrorKind}
    assert errors["TOOL_NOT_FOUND"] == {
        "code": -32020,
        "message": "No registered tool has that name.",
        "data": {"kind": "TOOL_NOT_FOUND"},
    }
    # Every error a method names is defined.
    for method in document["methods"]:
        for ref in method.get("errors", []):
            assert ref["$ref"].rsplit("/", 1)[1] in errors


def test_a_method_added_to_the_registry_appears(monkeypatch: pytest.MonkeyPatch) -> None:
    """Adding a method is one entry in hostd.control.models's tables (here a hostd -> parent request)."""

    class AskParams(p.Wire):
        """``test/ask {question}``: a question for the user."""

        question: str

    class AskResult(wire_params._Params):
        answer: str

    monkeypatch.setattr(p, "PARENT_REQUESTS", {"test/ask": AskParams, "test/tell": AskParams}, raising=False)
    monkeypatch.setattr(p, "PARENT_RESULTS", {"test/ask": AskResult}, raising=False)
    document = openrpc.document()
    tell = next(m for m in document["methods"] if m["name"] == "test/tell")
    assert tell["result"] == {"name": "test/tell result", "schema": {}}
    ask = next(m for m in document["methods"] if m["name"] == "test/ask")
    assert ask["x-direction"] == "parent-request"
    assert ask["summary"] == "`test/ask {question}`: a question for the user."
    assert ask["params"] == [{"name": "question", "required": True, "schema": {"title": "Question", "type": "string"}}]
    assert ask["result"]["schema"] == {"$ref": "#/components/schemas/AskResult"}
    validate(document)


def test_docs_main_writes_the_document(tmp_path: Path) -> None:
    target = tmp_path / "protocol.md"
    target.write_text(f"{docs.BEGIN_MARKER}\n{docs.END_MARKER}\n", encoding="utf-8")
    assert docs.main([str(target)]) == 0
    assert (tmp_path / "openrpc.json").read_text(encoding="utf-8") == openrpc.document_text()
    (tmp_path / "openrpc.json").write_text("{}\n", encoding="utf-8")
    assert docs.main(["--check", str(target)]) == 1


async def test_rpc_discover_answers_the_document(tmp_path: Path) -> None:
    async with HostdClient.spawn(["--state-dir", str(tmp_path / "s")]) as client:
        answer = await client.request("rpc.discover")
        assert await client.request("rpc.discover", {}) == answer
    assert answer == json.loads(OPENRPC_DOC.read_text(encoding="utf-8"))


def test_initialize_params_model_matches_what_control_reads() -> None:
    """hostd.control.server checks initialize's params by hand; the documentation model must name the same fields."""
    import inspect  # noqa: PLC0415
    import re  # noqa: PLC0415

    from hostd.control import core as control  # noqa: PLC0415

    read = set(re.findall(r'params\.get\("(\w+)"', inspect.getsource(control.parse_initialize)))
    documented = {info.alias or name for name, info in p.InitializeParams.model_fields.items()}
    assert read == documented, "add the field to hostd.control.models.InitializeParams (or stop reading it)"


def test_docs_main_names_a_method_missing_from_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "protocol.md"
    target.write_text(f"{docs.BEGIN_MARKER}\n{docs.END_MARKER}\n", encoding="utf-8")
    monkeypatch.setitem(p.RESULTS, "plugins/frobnicate", None)
    assert docs.main([str(target)]) == 1
    assert capsys.readouterr().err == (
        "docs/openrpc.json: methods in only one of protocol.PARAMS and protocol.RESULTS: ['plugins/frobnicate']\n"
    )
