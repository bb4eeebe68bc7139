"""Client driver for the official MCP conformance suite (``@modelcontextprotocol/conformance``), through hostd.

The harness starts a mock MCP server for one scenario and runs this script with the server's URL as the
last argument, the scenario name in ``MCP_CONFORMANCE_SCENARIO`` and, for some scenarios, a JSON context
in ``MCP_CONFORMANCE_CONTEXT`` (auth clients, the calls to make: ``toolCalls``). The driver plays an
application embedding hostd: it starts ``hostd serve`` (a private state folder), installs the URL as a
remote plugin (imported-style: the tools the server reports are recorded at the first enable and
approved), enables it, does what the scenario asks (:func:`exercise`: tool calls, a resource read, a
prompt get), then shuts hostd down. As the parent it plays the browser for OAuth: it fetches the
``auth/authorize`` URL without following redirects and hands the redirect back with ``auth/callback``.
It serves form elicitation (declared in ``initialize``, ``mcp.elicitation`` granted to the plugin) and
accepts every form with the schema's defaults (SEP-1034). It names the client ID metadata document the
application publishes (:data:`CLIENT_ID_METADATA_DOCUMENT`). A pre-registered OAuth client from the context
(``client_id``, ``client_secret``) goes into the manifest's ``backend.oauth``, the secret as a
``${secret:NAME}`` reference set with ``plugins/configure``, as an application would.

Exit status 0 when every step succeeded; the harness judges the traffic it saw either way.
Run by conformance/run.sh; by hand: ``MCP_CONFORMANCE_SCENARIO=tools_call python conformance/driver.py URL``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import trio

from hostd.cli.client import HostdClient, RpcError, plugin_environment

#: What each scenario does once the plugin is ready: ``(tool, arguments)`` to call, or None.
CALLS: dict[str, tuple[str, dict[str, Any]] | None] = {
    "initialize": None,
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "sse-retry": ("test_reconnection", {}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
}

#: Scenarios that judge how the client calls each tool the server offers (SEP-2322 rounds: echo state, no
#: state, an unrelated call, a result without ``resultType``; x-mcp-header: the valid tool is called, the
#: invalid ones hostd dropped are not): every tool hostd lists is called, arguments from
#: :func:`minimal_arguments`, in the server's order.
CALL_EVERY_TOOL = frozenset({"sep-2322-client-request-state", "http-invalid-tool-headers"})

#: ``json-schema-2020-12-preservation``: the tool whose ``inputSchema`` hostd reports is sent back,
#: verbatim, as the ``schema`` argument of the echo tool (the scenario diffs it against its fixture).
SCHEMA_ECHO = ("json_schema_2020_12_tool", "json_schema_echo")

#: ``http-standard-headers`` judges ``Mcp-Method`` / ``Mcp-Name`` on each method that carries them: after the
#: tools, the driver lists resources and prompts and reads / gets the first of each.
STANDARD_HEADERS = "http-standard-headers"

#: The secret that holds a pre-registered client's secret (``backend.oauth.client_secret``).
CLIENT_SECRET = "CONFORMANCE_CLIENT_SECRET"
#: What the driver tells hostd it serves as the parent (``initialize.params.capabilities``).
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}}
#: Where the application the driver plays publishes its OAuth client ID metadata document
#: (``initialize.params.oauth.clientIdMetadataDocument``): the URL the suite's authorization servers expect
#: as ``client_id`` when they advertise ``client_id_metadata_document_supported`` (auth/basic-cimd).
CLIENT_ID_METADATA_DOCUMENT = "https://conformance-test.local/client-metadata.json"


def log(message: str) -> None:
    print(f"driver: {message}", file=sys.stderr, flush=True)


def minimal_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments that satisfy ``schema``'s ``required`` list: per property, its ``default``, ``const``, first
    ``enum`` member, or a value of its ``type`` (``"conformance"``, 1, true, ``{}``, ``[]``, null)."""
    samples: dict[str, Any] = {"string": "conformance", "integer": 1, "number": 1, "boolean": True}
    samples |= {"object": {}, "array": [], "null": None}
    properties = schema.get("properties") or {}
    arguments: dict[str, Any] = {}
    for name in schema.get("required") or []:
        spec = properties.get(name) or {}
        if "default" in spec:
            arguments[name] = spec["default"]
        elif "const" in spec:
            arguments[name] = spec["const"]
        elif spec.get("enum"):
            arguments[name] = spec["enum"][0]
        else:
            kind = spec.get("type", "string")
            arguments[name] = samples.get(kind if isinstance(kind, str) else kind[0], "conformance")
    return arguments


def form_defaults(params: dict[str, Any]) -> dict[str, Any]:
    """The parent's answer to ``elicitation/create {plugin, params}``: accept, each field at its default.

    ``params.params.requestedSchema`` is the server's flat object schema; a property with a ``default``
    (string, number, integer, boolean, enum member) is answered with it (SEP-1034: a client fills in
    defaults the person left untouched); a property without one is left out.
    """
    schema = params.get("params", {}).get("requestedSchema") or {}
    properties = schema.get("properties") or {}
    content = {name: spec["default"] for name, spec in properties.items() if "default" in spec}
    return {"action": "accept", "content": content}


async def browser(hostd: HostdClient, nursery: trio.Nursery, method: str, params: dict[str, Any]) -> Any:
    """The parent's side of ``auth/authorize``: "log in" by fetching the URL; hand the redirect back."""
    if method == "elicitation/create":
        return form_defaults(params)
    if method != "auth/authorize":
        raise RpcError({"code": -32601, "message": f"the conformance driver does not serve {method}"})
    async with httpx2.AsyncClient(follow_redirects=False, trust_env=False) as http:
        answer = await http.get(params["url"])
    location = answer.headers.get("location")
    if answer.status_code not in (301, 302, 303, 307, 308) or not location:
        raise RpcError({"code": -32000, "message": f"the authorization URL answered {answer.status_code}"})

    async def hand_back() -> None:  # after answering auth/authorize: hostd waits for the redirect then
        await hostd.request("auth/callback", {"plugin": params["plugin"], "url": location})

    nursery.start_soon(hand_back)
    return {}


def manifest(url: str, context: dict[str, Any]) -> dict[str, Any]:
    backend: dict[str, Any] = {"type": "mcp", "transport": "streamable-http", "url": url, "protocol": "auto"}
    # The suite's authorization server listens on another loopback port than its MCP server. hostd reaches
    # loopback only at the approved endpoint itself unless the manifest names the host (issue 29: every
    # destination is judged against the approved endpoint), as a user approving such a setup would.
    backend["allow_private"] = [urlsplit(url).hostname]
    if "client_id" in context:  # a client registered in advance (auth/pre-registration)
        backend["oauth"] = {"client_id": context["client_id"]}
        if "client_secret" in context:
            backend["oauth"]["client_secret"] = "${secret:" + CLIENT_SECRET + "}"
    return {
        "id": "conformance",
        "name": "Conformance mock server",
        "version": "0.0.0",
        "permissions": ["mcp.elicitation"],
        "contributes": {"tools": [], "discover": True},
        "backend": backend,
    }


async def enable(hostd: HostdClient) -> dict[str, Any]:
    """Enable, approving the recorded tools when the first enable asks for it (one more round)."""
    for _round in range(3):
        try:
            status: dict[str, Any] = await hostd.request("plugins/enable", {"id": "conformance"}, timeout=60)
        except RpcError as error:
            if error.kind != "MCP_TRUST_APPROVAL_REQUIRED":
                raise
            permissions = error.data.get("permissions") or []
            if permissions:
                await hostd.request("plugins/grant", {"id": "conformance", "permissions": permissions})
            await hostd.request("plugins/approve", {"id": "conformance", "digest": error.data["launch"]["digest"]})
            continue
        return status
    raise RuntimeError("the plugin kept asking for approval")


async def call(hostd: HostdClient, tool: str, arguments: dict[str, Any]) -> None:
    """``tools/call`` one of the plugin's tools by its MCP name; a tool error is logged, not raised."""
    try:
        result = await hostd.request("tools/call", {"name": f"conformance.{tool}", "arguments": arguments})
    except RpcError as error:
        log(f"{tool}: {error.kind}: {error.message}")
        return
    log(f"{tool}: {json.dumps(result)[:200]}")


async def exercise(hostd: HostdClient, scenario: str, context: dict[str, Any]) -> None:
    """Do what ``scenario`` asks once the plugin is ready (module constants; ``toolCalls`` in the context)."""
    tools = (await hostd.request("tools/list", {"plugin": "conformance"}))["tools"]
    schemas = {tool["name"].removeprefix("conformance."): tool["inputSchema"] for tool in tools}
    log(f"{scenario}: tools {sorted(schemas)}")
    if "toolCalls" in context:  # the scenario names its calls (http-custom-headers)
        for planned in context["toolCalls"]:
            await call(hostd, planned["name"], planned.get("arguments") or {})
    elif scenario in CALLS:
        planned_call = CALLS[scenario]
        if planned_call is not None:
            await call(hostd, *planned_call)
    elif scenario in CALL_EVERY_TOOL or scenario == STANDARD_HEADERS:
        for name, schema in schemas.items():
            await call(hostd, name, minimal_arguments(schema))
    elif scenario == "json-schema-2020-12-preservation":
        focal, echo = SCHEMA_ECHO
        if focal in schemas:
            await call(hostd, echo, {"schema": schemas[focal]})
    elif schemas:  # the auth scenarios and the rest: one authorized call, the first tool listed
        first = next(iter(schemas))
        await call(hostd, first, minimal_arguments(schemas[first]))
    if scenario == STANDARD_HEADERS:
        resources = (await hostd.request("resources/list", {"plugin": "conformance"}))["resources"]
        if resources:
            await hostd.request("resources/read", {"plugin": "conformance", "uri": resources[0]["uri"]})
        prompts = (await hostd.request("prompts/list", {"plugin": "conformance"}))["prompts"]
        if prompts:
            await hostd.request("prompts/get", {"name": prompts[0]["name"], "arguments": {}})


async def drive(url: str, scenario: str, context: dict[str, Any], work: Path) -> None:
    folder = work / "plugin"
    folder.mkdir()
    (folder / "plugin.json").write_text(json.dumps(manifest(url, context)))
    args = ["--state-dir", str(work / "state"), "--no-login-path"]
    hello = {
        "clientInfo": {"name": "hostd-conformance-driver", "version": "0"},
        "capabilities": CAPABILITIES,
        "oauth": {"clientIdMetadataDocument": CLIENT_ID_METADATA_DOCUMENT},
    }
    async with (
        HostdClient.spawn(args, env=plugin_environment(), initialize=hello) as hostd,
        trio.open_nursery() as nursery,
    ):

        async def on_request(method: str, params: dict[str, Any]) -> Any:
            return await browser(hostd, nursery, method, params)

        hostd.on_request = on_request
        info = await hostd.request("plugins/install", {"path": str(folder)})
        if "client_secret" in context:
            await hostd.request(
                "plugins/configure", {"id": "conformance", "values": {CLIENT_SECRET: context["client_secret"]}}
            )
        await hostd.request("plugins/grant", {"id": "conformance", "permissions": ["mcp.elicitation"]})
        await hostd.request("plugins/approve", {"id": "conformance", "digest": info["launch"]["digest"]})
        status = await enable(hostd)
        log(f"{scenario}: {status['status']} ({status['protocol_version']}, {status['tools_count']} tools)")
        await exercise(hostd, scenario, context)
        await hostd.request("plugins/disable", {"id": "conformance"})


def main() -> int:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    failed: list[RpcError] = []
    with tempfile.TemporaryDirectory(prefix="hostd-conformance-") as work:
        try:
            trio.run(drive, url, scenario, context, Path(work))
        except* RpcError as group:  # raised alone or out of drive's nursery: one line each, no traceback
            failed.extend(error for error in group.exceptions if isinstance(error, RpcError))
    for error in failed:
        log(f"{scenario}: {error.kind}: {error.message}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
