"""Client driver for the official MCP conformance suite (``@modelcontextprotocol/conformance``), through hostd.

The harness starts a mock MCP server for one scenario and runs this script with the server's URL as the
last argument, the scenario name in ``MCP_CONFORMANCE_SCENARIO`` and, for some auth scenarios, a JSON
context in ``MCP_CONFORMANCE_CONTEXT``. The driver plays an application embedding hostd: it starts
``hostd serve`` (a private state folder), installs the URL as a remote plugin (imported-style: the tools
the server reports are recorded at the first enable and approved), enables it, does what the scenario
asks (a tool call), then shuts hostd down. As the parent it plays the browser for OAuth: it fetches the
``auth/authorize`` URL without following redirects and hands the redirect back with ``auth/callback``.
It serves form elicitation (declared in ``initialize``, ``mcp.elicitation`` granted to the plugin) and
accepts every form with the schema's defaults (SEP-1034). A pre-registered OAuth client from the context
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

import httpx2
import trio

from hostd.client import HostdClient, RpcError, plugin_environment

#: What each scenario does once the plugin is ready: ``(tool, arguments)`` to call, or None.
CALLS: dict[str, tuple[str, dict[str, Any]] | None] = {
    "initialize": None,
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "sse-retry": ("test_reconnection", {}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
}


#: The secret that holds a pre-registered client's secret (``backend.oauth.client_secret``).
CLIENT_SECRET = "CONFORMANCE_CLIENT_SECRET"
#: What the driver tells hostd it serves as the parent (``initialize.params.capabilities``).
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}}


def log(message: str) -> None:
    print(f"driver: {message}", file=sys.stderr, flush=True)


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


async def drive(url: str, scenario: str, context: dict[str, Any], work: Path) -> None:
    folder = work / "plugin"
    folder.mkdir()
    (folder / "plugin.json").write_text(json.dumps(manifest(url, context)))
    args = ["--state-dir", str(work / "state"), "--no-login-path"]
    hello = {"clientInfo": {"name": "hostd-conformance-driver", "version": "0"}, "capabilities": CAPABILITIES}
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
        call = CALLS.get(scenario)
        if call is not None:
            result = await hostd.request("tools/call", {"name": f"conformance.{call[0]}", "arguments": call[1]})
            log(f"{call[0]}: {json.dumps(result)[:200]}")
        elif scenario.startswith("auth/"):  # one authorized call: the tools the mock lists, the first of them
            tools = await hostd.request("tools/list", {"plugin": "conformance"})
            if tools["tools"]:
                name = tools["tools"][0]["name"]
                await hostd.request("tools/call", {"name": name, "arguments": {}})
        await hostd.request("plugins/disable", {"id": "conformance"})


def main() -> int:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="hostd-conformance-") as work:
        try:
            trio.run(drive, url, scenario, context, Path(work))
        except RpcError as error:
            log(f"{scenario}: {error.kind}: {error.message}")
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
