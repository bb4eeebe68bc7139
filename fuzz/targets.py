"""The fuzz targets: one function per parser of a stranger's document, from bytes, with its property.

The property is the one of ``tests/test_fuzz_documents.py`` (which calls these same functions): whatever
the bytes, the parser returns, or raises that document's named error (a :class:`HostError` of its kind);
anything else (another exception, an error of the wrong kind, a failed assertion) is a crash. The
converters also hold their output to the manifest (:func:`hostd.install.generated.manifest_errors` is
empty for what they accept).

Each target takes the raw bytes a fuzzer hands it; :data:`TARGETS` names them for ``python -m fuzz``
and for the replay of saved crashers (``tests/test_fuzz_crashers.py``).
"""

from __future__ import annotations

import atexit
import hashlib
import ipaddress
import json
import shutil
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from fuzz.net_targets import allowlist, proxy_head
from hostd.control import core
from hostd.control.models import PARAMS
from hostd.control.params import _Params, parse_params
from hostd.install import bundle, serverjson
from hostd.install.generated import manifest_errors
from hostd.install.importer import ConfigError, plan_import
from hostd.install.manifest import load_manifest
from hostd.install.signing import Signature
from hostd.mcp.session import ClientSession, Invalid
from hostd.mcp.transport.stdio import answered_id
from hostd.net.dns import FAKE_NETWORK, FakeNames, respond
from hostd.wire import tracing
from hostd.wire.errors import ErrorKind, HostError
from hostd.wire.framing import (
    PARENT_FRAME_LIMIT,
    PLUGIN_FRAME_LIMIT,
    FrameDiscarded,
    FrameTooLarge,
    InvalidJSON,
    LineDecoder,
    Message,
    describe_head,
    encode,
)


def expect_kind(exc: HostError, kind: ErrorKind) -> None:
    """The document's named error, and one hostd can answer (its error object serialises)."""
    assert exc.kind is kind, f"{exc.kind.name} where {kind.name} was expected: {exc}"
    encode(core.error_response(1, exc))


def text_of(data: bytes) -> str:
    """The bytes as text a caller could hand over: UTF-8, lone surrogates kept (``surrogatepass``)."""
    return data.decode("utf-8", "surrogatepass") if _decodes(data) else data.decode("utf-8", "replace")


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return False
    return True


# -- the manifest loader ------------------------------------------------------------------------


@cache
def _folders() -> tuple[Path, Path]:
    """One folder for plugin.json, one for plugin.yaml, reused by every run (the loader only reads)."""
    root = _scratch("hostd-fuzz-")
    (root / "json").mkdir()
    (root / "yaml").mkdir()
    return root / "json", root / "yaml"


def check_manifest_file(name: str, data: bytes, folder: Path) -> None:
    """``load_manifest`` on a folder holding ``data`` as ``name``: MANIFEST_INVALID, or it loads with the digest
    of the very bytes written."""
    (folder / name).write_bytes(data)
    try:
        _manifest, digest = load_manifest(folder)
    except HostError as exc:
        expect_kind(exc, ErrorKind.MANIFEST_INVALID)
    else:
        assert digest == "sha256:" + hashlib.sha256(data).hexdigest()


def manifest(data: bytes) -> None:
    """The bytes as ``plugin.json``, then as ``plugin.yaml``."""
    json_folder, yaml_folder = _folders()
    check_manifest_file("plugin.json", data, json_folder)
    check_manifest_file("plugin.yaml", data, yaml_folder)


# -- the import converter ----------------------------------------------------------------------


def check_import(config: Any, *, wire: bool = False) -> None:
    """``plan_import``: a ConfigError that says what is wrong, or one entry per server, each either invalid or a
    manifest hostd loads. ``wire``: the config came as text, as on the control channel, so what
    ``plugins/import`` answers (the IMPORT_INVALID it makes of a ConfigError, the entries) must serialise."""
    try:
        entries = plan_import(config)
    except ConfigError as exc:
        assert str(exc), "a ConfigError says what is wrong"
        if wire:  # as hostd.host.install_methods renders it
            where = {"errors": [{"field": exc.field, "message": str(exc)}]} if exc.field is not None else {}
            expect_kind(HostError(ErrorKind.IMPORT_INVALID, f"cannot import: {exc}", **where), ErrorKind.IMPORT_INVALID)
        return
    if isinstance(config, dict):  # one entry per server, whatever the servers hold
        assert len(entries) == len(next(iter(config.values()))), entries
    wrong = [
        (entry.name, entry.outcome, entry.manifest and manifest_errors(entry.manifest))
        for entry in entries
        if (entry.outcome == "invalid") != (entry.manifest is None)
        or (entry.manifest is not None and manifest_errors(entry.manifest))
    ]
    assert wrong == []
    assert [json.loads(json.dumps(entry.to_wire()))["name"] for entry in entries] == [e.name for e in entries]
    if wire:
        encode([entry.to_wire() for entry in entries])


def import_config(data: bytes) -> None:
    """The bytes as the config's text."""
    check_import(text_of(data), wire=True)


# -- the registry converter --------------------------------------------------------------------


def check_serverjson(document: Any, index: int = 0) -> None:
    """``serverjson.plan``: PACKAGE_INVALID naming a field, or a manifest hostd loads xor a bundle to fetch."""
    try:
        planned = serverjson.plan(document, index)
    except HostError as exc:
        expect_kind(exc, ErrorKind.PACKAGE_INVALID)
        assert isinstance(exc.data["errors"][0]["field"], str)
        return
    # A plan is a manifest or a bundle to fetch and check, never both, never neither.
    assert (planned.manifest is None) == (planned.bundle_url is not None and planned.sha256 is not None), planned
    if planned.manifest is not None:
        assert manifest_errors(planned.manifest) == [], planned.manifest


def server_json(data: bytes) -> None:
    """The bytes as a registry entry's text (package 0)."""
    check_serverjson(text_of(data))


# -- the bundle reader -------------------------------------------------------------------------


@cache
def _bundle_root() -> Path:
    return _scratch("hostd-fuzz-bundle-")


def _scratch(prefix: str) -> Path:
    """A temporary folder for this process's runs, removed when the process exits (the replay test, a
    campaign that ends normally; libFuzzer ending on a crash may leave it)."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def check_bundle(data: bytes, root: Path) -> None:
    """``install_bundle`` of an archive: PACKAGE_INVALID (leaving nothing behind), or a manifest hostd loads."""
    found = bundle.Bundle(path=root / "b.mcpb", archive=data, sha256="0" * 64, checked=Signature("unsigned"))
    target = root / "bundles"
    try:
        _folder, document = bundle.install_bundle(found, target)
    except HostError as exc:
        expect_kind(exc, ErrorKind.PACKAGE_INVALID)
        assert not target.exists() or not any(target.iterdir()), "a refused bundle leaves nothing behind"
        return
    shutil.rmtree(target)
    assert manifest_errors(document) == [], document


def bundle_reader(data: bytes) -> None:
    """The bytes as a ``.mcpb`` archive, read and installed."""
    root = _bundle_root()
    try:
        check_bundle(data, root)
    finally:
        shutil.rmtree(root / "bundles", ignore_errors=True)


# -- the control channel -----------------------------------------------------------------------


def check_request(value: Any, size: int) -> None:
    """One parsed message from the parent, through what the control channel does before a handler runs:
    ``classify`` (the JSON-RPC envelope and the depth bound), then ``initialize``'s own parse or
    ``parse_params`` with the method's params model, and the trace context of ``params._meta``. A refusal
    and every HostError serialise as the answer; any HostError other than INVALID_PARAMS is a crash."""
    incoming = core.classify(value, size)
    if isinstance(incoming, core.Refusal):
        encode(core.error_response(incoming.rid, incoming.error))
        return
    if not isinstance(incoming, core.IncomingRequest):
        return
    params: Any = incoming.params
    try:
        if incoming.method == "initialize":
            core.parse_initialize(params, None)
            return
        meta = params.pop("_meta", None) if isinstance(params, dict) and "_meta" in params else None
        with tracing.request_span(incoming.method, incoming.rid, meta):
            model = PARAMS.get(incoming.method)
            if model is not None and issubclass(model, _Params):
                parse_params(model, params)
    except HostError as exc:
        expect_kind(exc, ErrorKind.INVALID_PARAMS)


def control_request(data: bytes) -> None:
    """The bytes as what the parent writes on hostd's stdin (one or more lines)."""
    decoder = LineDecoder(PARENT_FRAME_LIMIT)
    for event in [*decoder.feed(data), *decoder.feed(b"\n")]:
        if isinstance(event, FrameTooLarge | InvalidJSON):
            describe_head(event.head)
        elif isinstance(event, Message):
            check_request(event.value, event.size)


# -- a plugin's output -------------------------------------------------------------------------


def _session() -> ClientSession:
    """A session with what a plugin link typically has in flight: a listing, a tool call, a listen stream."""
    session = ClientSession({"name": "hostd-fuzz", "version": "0"})
    session.start_request("tools/list", context="list")
    session.start_request("tools/call", {"name": "t", "arguments": {}}, context="call", progress=True)
    session.start_request("subscriptions/listen", context="listen", listen=True)
    return session


def plugin_output(data: bytes) -> None:
    """The bytes as a plugin's stdout: framing, then each message through ``ClientSession.receive``; what the
    link does with noise (quote it) and with a discarded over-long line (read the id it answered)."""
    decoder = LineDecoder(PLUGIN_FRAME_LIMIT)
    session = _session()
    for event in [*decoder.feed(data), *decoder.feed(b"\n")]:
        if isinstance(event, FrameTooLarge | InvalidJSON):
            describe_head(event.head)
        elif isinstance(event, FrameDiscarded):
            answered_id(event.head, event.tail)
        elif isinstance(event, Message):
            received = session.receive(event.value, event.size, b"")
            if isinstance(received, Invalid):
                encode(event.value)[:80]


# -- transparent mode's DNS (issue 26) ---------------------------------------------------------


def dns_query(data: bytes) -> None:
    """The bytes as a plugin's DNS query to hostd (hostd/net/dns.py ``respond``): no exception; an answer only
    to a query (12 bytes at least, QR clear), echoing its id, with QR set; an address only from the fake range."""
    names = FakeNames(capacity=4)
    reply = respond(data, names, lambda name, qtype: name.endswith(".test"))
    if reply is None:
        return
    assert len(data) >= 12 and not data[2] & 0x80, "an answer to a packet that is no query"
    assert reply[:2] == data[:2] and reply[2] & 0x80, "an answer that is not one to this query"
    if struct.unpack_from("!H", reply, 6)[0]:
        address = ipaddress.IPv4Address(reply[-4:])
        assert address in FAKE_NETWORK and names.name_for(str(address)) is not None, f"{address} is no fake one"


@dataclass(frozen=True)
class Target:
    name: str
    run: Callable[[bytes], None]
    about: str


TARGETS: dict[str, Target] = {
    target.name: target
    for target in [
        Target("manifest", manifest, "load_manifest on plugin.json and plugin.yaml holding the bytes"),
        Target("import", import_config, "plan_import of a config's text (plugins/import)"),
        Target("serverjson", server_json, "serverjson.plan of a registry entry's text"),
        Target("bundle", bundle_reader, "bundle.install_bundle of a .mcpb archive"),
        Target("control", control_request, "the control channel: framing, classify, params parsing"),
        Target("plugin-output", plugin_output, "a plugin's stdout: framing and ClientSession.receive"),
        Target("dns", dns_query, "hostd/net/dns.py respond: a plugin's DNS query in transparent mode"),
        Target("proxy-head", proxy_head, "a plugin's request head to its network proxy: _parse_head, _authority"),
        Target("allowlist", allowlist, "network allowlist entries, one a line: Allowlist.parse, parse_entry"),
    ]
}
