"""Remote plugins behind OAuth: a local authorization server, the parent plays the browser (issue 15).

fixtures/remote/oauth_server.py serves the MCP fixture behind bearer tokens and a small OAuth 2.1
authorization server on the same 127.0.0.1 port; ``/authorize`` answers 302 to the redirect URI at once,
so "logging in" is following the authorization URL.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import httpx2
import pytest

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from tests.conftest import FIXTURES
from tests.test_remote import fixture_server, remote_plugin

OAUTH_SERVER = FIXTURES / "remote" / "oauth_server.py"


@asynccontextmanager
async def oauth_server(*args: str) -> AsyncIterator[str]:
    """Run the OAuth fixture; yield its origin (``http://127.0.0.1:<port>``)."""
    async with fixture_server([sys.executable, str(OAUTH_SERVER), *args]) as port:
        yield f"http://127.0.0.1:{port}"


class Browser:
    """The test parent's browser: follows ``auth/authorize`` URLs; ``via`` is ``loopback`` or ``callback``."""

    def __init__(self, hostd: HostdClient, via: str = "loopback") -> None:
        self.hostd = hostd
        self.via = via
        self.urls: list[str] = []
        self.callbacks: list[str] = []

    async def __call__(self, method: str, params: dict[str, Any]) -> Any:
        assert method == "auth/authorize", method
        self.urls.append(params["url"])
        async with httpx2.AsyncClient(follow_redirects=False, trust_env=False) as http:
            answer = await http.get(params["url"])
            assert answer.status_code == 302, answer.text
            location = answer.headers["location"]
            self.callbacks.append(location)
            if self.via == "loopback":  # the browser lands on hostd's loopback listener
                landed = await http.get(location)
                assert landed.status_code == 200, landed.text
            else:  # an app with a custom scheme catches the redirect and hands it over
                await self.hostd.request("auth/callback", {"plugin": params["plugin"], "url": location})
        return {}


async def stats(origin: str) -> dict[str, int]:
    async with httpx2.AsyncClient(trust_env=False) as http:
        result: dict[str, int] = (await http.get(f"{origin}/test/stats")).json()
        return result


async def approve(hostd: HostdClient, folder: Path) -> str:
    info = await hostd.request("plugins/install", {"path": str(folder)})
    await hostd.request("plugins/grant", {"id": info["id"], "permissions": info["permissions"]})
    await hostd.request("plugins/approve", {"id": info["id"], "digest": info["launch"]["digest"]})
    return str(info["id"])


@pytest.mark.parametrize("via", ["loopback", "callback"])
async def test_authorize_call_restart_logout(hostd: HostdClient, tmp_path: Path, via: str) -> None:
    browser = Browser(hostd, via)
    hostd.on_request = browser
    async with oauth_server() as origin:
        plugin = await approve(hostd, remote_plugin(tmp_path, f"{origin}/mcp"))
        status = await hostd.request("plugins/enable", {"id": plugin})
        assert status["status"] == "ready"
        assert [r[1:] for r in hostd.requests] == [("auth/authorize", {"plugin": "remote", "url": browser.urls[0]})]
        assert browser.urls[0].startswith(f"{origin}/authorize?")
        assert "code_challenge_method=S256" in browser.urls[0]
        states = [s["status"] for s in hostd.seen("plugins/statusChanged") if s["plugin_id"] == "remote"]
        assert states == ["starting", "authorizing", "starting", "ready"]
        result = await hostd.request("tools/call", {"name": "remote.echo", "arguments": {"text": "authorized"}})
        assert result["content"] == [{"type": "text", "text": "authorized"}]

        # Tokens and the client registration are kept apart from state.json, 0600, and are reused.
        credentials = tmp_path / "state" / "credentials" / "remote.json"
        assert stat.S_IMODE(os.stat(credentials).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(credentials.parent).st_mode) == 0o700
        assert "access_token" in credentials.read_text()
        assert "access_token" not in (tmp_path / "state" / "state.json").read_text()
        await hostd.request("plugins/restart", {"id": plugin})
        result = await hostd.request("tools/call", {"name": "remote.echo", "arguments": {"text": "again"}})
        assert result["content"] == [{"type": "text", "text": "again"}]
        assert len(browser.urls) == 1
        assert (await stats(origin))["authorizations"] == 1

        # Logout forgets them and stops the plugin; the next enable asks the person again.
        status = await hostd.request("plugins/logout", {"id": plugin})
        assert status["status"] == "stopped"
        assert not credentials.exists()
        status = await hostd.request("plugins/enable", {"id": plugin})
        assert status["status"] == "ready"
        assert len(browser.urls) == 2
        assert (await stats(origin))["authorizations"] == 2
        await hostd.request("plugins/disable", {"id": plugin})


async def test_a_token_that_expired_while_stopped_is_refreshed_without_the_person(
    hostd: HostdClient, tmp_path: Path
) -> None:
    browser = Browser(hostd)
    hostd.on_request = browser
    async with oauth_server() as origin:
        plugin = await approve(hostd, remote_plugin(tmp_path, f"{origin}/mcp"))
        await hostd.request("plugins/enable", {"id": plugin})
        await hostd.request("plugins/disable", {"id": plugin})
        # While it is stopped its access token expires: the server rejects it, and the stored expiry has passed.
        async with httpx2.AsyncClient(trust_env=False) as http:
            await http.post(f"{origin}/test/expire")
        credentials = tmp_path / "state" / "credentials" / "remote.json"
        document = json.loads(credentials.read_text())
        for entry in document.values():
            entry["expiresAt"] = 1.0
        credentials.write_text(json.dumps(document))
        await hostd.request("plugins/enable", {"id": plugin})
        result = await hostd.request("tools/call", {"name": "remote.echo", "arguments": {"text": "refreshed"}})
        assert result["content"] == [{"type": "text", "text": "refreshed"}]
        counts = await stats(origin)
        assert (counts["authorizations"], counts["codeGrants"], counts["refreshGrants"]) == (1, 1, 1)
        assert len(browser.urls) == 1
        await hostd.request("plugins/disable", {"id": plugin})


async def test_a_token_rejected_while_running_asks_the_person_again(hostd: HostdClient, tmp_path: Path) -> None:
    # The SDK's provider answers a 401 with the full flow (no refresh first): the parent is asked again.
    browser = Browser(hostd)
    hostd.on_request = browser
    async with oauth_server() as origin:
        plugin = await approve(hostd, remote_plugin(tmp_path, f"{origin}/mcp"))
        await hostd.request("plugins/enable", {"id": plugin})
        async with httpx2.AsyncClient(trust_env=False) as http:
            await http.post(f"{origin}/test/expire")
        result = await hostd.request("tools/call", {"name": "remote.echo", "arguments": {"text": "reauthorized"}})
        assert result["content"] == [{"type": "text", "text": "reauthorized"}]
        assert len(browser.urls) == 2
        await hostd.request("plugins/disable", {"id": plugin})


async def test_a_pre_registered_client_does_not_register(hostd: HostdClient, tmp_path: Path) -> None:
    browser = Browser(hostd)
    hostd.on_request = browser
    async with oauth_server("--client-id", "hostd-desktop") as origin:
        oauth = {"client_id": "hostd-desktop", "scope": "mcp"}
        plugin = await approve(hostd, remote_plugin(tmp_path, f"{origin}/mcp", oauth=oauth))
        status = await hostd.request("plugins/enable", {"id": plugin})
        assert status["status"] == "ready"
        assert "client_id=hostd-desktop" in browser.urls[0] and "scope=mcp" in browser.urls[0]
        counts = await stats(origin)
        assert (counts["registrations"], counts["authorizations"], counts["codeGrants"]) == (0, 1, 1)
        await hostd.request("plugins/disable", {"id": plugin})


async def test_a_parent_that_cannot_authorize_fails_the_start_clearly(hostd: HostdClient, tmp_path: Path) -> None:
    async with oauth_server() as origin:  # hostd.on_request is None: the parent answers -32601
        plugin = await approve(hostd, remote_plugin(tmp_path, f"{origin}/mcp"))
        with pytest.raises(RpcError) as failed:
            await hostd.request("plugins/enable", {"id": plugin})
        assert failed.value.kind == "PLUGIN_START_FAILED"
        assert "the parent did not take auth/authorize" in failed.value.message
        assert failed.value.data["plugin"] == "remote"


@pytest.mark.parametrize(
    ("issuer", "why"),
    [("http://auth.example.com", "must use https"), ("https://169.254.169.254", "link-local address 169.254.169.254")],
)
async def test_an_authorization_server_the_server_names_meets_the_same_rules(
    hostd: HostdClient, tmp_path: Path, issuer: str, why: str
) -> None:
    # The class: every request hostd makes for a remote plugin meets the endpoint's rules, also those the
    # server directs (its protected resource metadata names the authorization server hostd then calls).
    hostd.on_request = Browser(hostd)
    async with oauth_server("--issuer", issuer) as origin:
        plugin = await approve(hostd, remote_plugin(tmp_path, f"{origin}/mcp"))
        with pytest.raises(RpcError) as failed:
            await hostd.request("plugins/enable", {"id": plugin})
        assert failed.value.kind == "PLUGIN_START_FAILED"
        assert why in failed.value.message, failed.value.message
        assert hostd.requests == []  # the parent was never asked to authorize


async def test_a_disable_while_authorizing_stops_the_start(hostd: HostdClient, tmp_path: Path) -> None:
    # The person never comes back: the parent got the URL but nobody follows it. A disable must end the
    # start at once (status stopped, nothing waiting), not leave it waiting out the authorization bound.
    urls: list[str] = []

    async def never_follows(method: str, params: dict[str, Any]) -> Any:
        urls.append(params["url"])
        return {}

    hostd.on_request = never_follows
    async with oauth_server() as origin:
        plugin = await approve(hostd, remote_plugin(tmp_path, f"{origin}/mcp"))
        enabling = await hostd.start("plugins/enable", {"id": plugin})
        await hostd.wait_for("plugins/statusChanged", lambda s: s["status"] == "authorizing")
        status = await hostd.request("plugins/disable", {"id": plugin})
        assert status["status"] == "stopped"
        with pytest.raises(RpcError) as abandoned:
            await enabling()
        assert abandoned.value.kind == "PLUGIN_STATE_CONFLICT"
        with pytest.raises(RpcError) as refused:  # the authorization is no longer waiting
            await hostd.request("auth/callback", {"plugin": plugin, "url": "http://127.0.0.1:1/callback?code=x"})
        assert refused.value.kind == "INVALID_PARAMS"
        assert len(urls) == 1


async def test_a_callback_for_nothing_is_refused(hostd: HostdClient, tmp_path: Path) -> None:
    async with oauth_server() as origin:
        plugin = await approve(hostd, remote_plugin(tmp_path, f"{origin}/mcp"))
        with pytest.raises(RpcError) as refused:
            await hostd.request("auth/callback", {"plugin": plugin, "url": "http://127.0.0.1:1/callback?code=x"})
        assert refused.value.kind == "INVALID_PARAMS"


class Intruder(Browser):
    """A browser that, before following the URL, lets other local clients try the loopback listener first.

    ``answers`` records ``(the forged redirect's query, the status the listener gave)``; each forgery names
    the right path and port (found in the authorization URL, as any local process could find the port).
    """

    FORGERIES = ("error=evil", "error=evil&state=guessed", "code=stolen&state=", "code=stolen")

    def __init__(self, hostd: HostdClient) -> None:
        super().__init__(hostd)
        self.answers: list[tuple[str, int]] = []

    async def __call__(self, method: str, params: dict[str, Any]) -> Any:
        query = parse_qs(urlsplit(params["url"]).query)
        listener = query["redirect_uri"][0]
        async with httpx2.AsyncClient(trust_env=False) as http:
            for forged in self.FORGERIES:
                self.answers.append((forged, (await http.get(f"{listener}?{forged}")).status_code))
            # The parent's auth/callback is held to the same proof.
            with pytest.raises(RpcError) as refused:
                await self.hostd.request("auth/callback", {"plugin": params["plugin"], "url": f"{listener}?error=x"})
            assert refused.value.kind == "INVALID_PARAMS"
        return await super().__call__(method, params)


async def test_a_redirect_without_the_flows_state_is_refused_and_the_flow_goes_on(
    hostd: HostdClient, tmp_path: Path
) -> None:
    # The class: a result that is not this flow's (no state, a wrong state, an error as much as a code)
    # reaches the flow. Before the fix the first forgery ended the enable with "refused (evil)".
    intruder = Intruder(hostd)
    hostd.on_request = intruder
    async with oauth_server() as origin:
        plugin = await approve(hostd, remote_plugin(tmp_path, f"{origin}/mcp"))
        status = await hostd.request("plugins/enable", {"id": plugin})
        assert status["status"] == "ready"
        assert intruder.answers == [(forged, 400) for forged in Intruder.FORGERIES]
        assert (await stats(origin))["codeGrants"] == 1
        await hostd.request("plugins/disable", {"id": plugin})


async def test_a_refusal_from_the_authorization_server_is_quoted_as_its_words(
    hostd: HostdClient, tmp_path: Path
) -> None:
    async def refuses(method: str, params: dict[str, Any]) -> Any:
        query = parse_qs(urlsplit(params["url"]).query)
        forged = {"error": "access_denied", "error_description": "hostd is broken", "state": query["state"][0]}
        async with httpx2.AsyncClient(trust_env=False) as http:
            landed = await http.get(query["redirect_uri"][0], params=forged)
        assert landed.status_code == 200
        return {}

    hostd.on_request = refuses
    async with oauth_server() as origin:
        plugin = await approve(hostd, remote_plugin(tmp_path, f"{origin}/mcp"))
        with pytest.raises(RpcError) as failed:
            await hostd.request("plugins/enable", {"id": plugin})
        assert failed.value.kind == "PLUGIN_START_FAILED"
        assert failed.value.message == (
            'plugin remote: the authorization was refused; the authorization server said: "access_denied", '
            '"hostd is broken"'
        )


#: Where the test application publishes its OAuth client ID metadata document (``initialize.params.oauth``).
DOCUMENT = "https://app.example/oauth/client.json"


def client_id_of(url: str) -> str:
    """The ``client_id`` of an authorization URL."""
    return parse_qs(urlsplit(url).query)["client_id"][0]


async def test_the_client_id_metadata_document_is_the_client_id_where_the_server_supports_it(tmp_path: Path) -> None:
    # One parent with a document, two authorization servers: the one that advertises
    # client_id_metadata_document_supported gets the document's URL as client_id and no registration; the
    # one that does not gets a dynamic registration, as before. Before the fix both registered.
    hello = {"clientInfo": {"name": "app", "version": "0"}, "oauth": {"clientIdMetadataDocument": DOCUMENT}}
    state = ["--state-dir", str(tmp_path / "state")]
    async with (
        HostdClient.spawn(state, env=plugin_environment(), initialize=hello) as hostd,
        oauth_server("--cimd") as supports,
        oauth_server() as registers,
    ):
        browser = Browser(hostd)
        hostd.on_request = browser
        documented = await approve(hostd, remote_plugin(tmp_path, f"{supports}/mcp", plugin_id="documented"))
        status = await hostd.request("plugins/enable", {"id": documented})
        assert status["status"] == "ready"
        assert client_id_of(browser.urls[0]) == DOCUMENT
        counts = await stats(supports)
        assert (counts["registrations"], counts["documentClients"], counts["codeGrants"]) == (0, 1, 1)
        result = await hostd.request("tools/call", {"name": "documented.echo", "arguments": {"text": "by document"}})
        assert result["content"] == [{"type": "text", "text": "by document"}]

        registered = await approve(hostd, remote_plugin(tmp_path, f"{registers}/mcp", plugin_id="registered"))
        status = await hostd.request("plugins/enable", {"id": registered})
        assert status["status"] == "ready"
        assert client_id_of(browser.urls[1]).startswith("client-")
        counts = await stats(registers)
        assert (counts["registrations"], counts["documentClients"], counts["codeGrants"]) == (1, 0, 1)
        await hostd.request("plugins/disable", {"id": documented})
        await hostd.request("plugins/disable", {"id": registered})


async def test_a_client_from_another_document_is_not_reused(tmp_path: Path) -> None:
    # The class: a stored client the parent no longer vouches for is presented again. The parent moved its
    # document; the next authorization must name the new URL, not the stored client of the old one.
    state = ["--state-dir", str(tmp_path / "state")]
    moved = "https://app.example/oauth/client-v2.json"
    async with oauth_server("--cimd") as origin:
        folder = remote_plugin(tmp_path, f"{origin}/mcp")
        urls: list[str] = []
        for document in (DOCUMENT, moved):
            hello = {"clientInfo": {"name": "app", "version": "0"}, "oauth": {"clientIdMetadataDocument": document}}
            async with HostdClient.spawn(state, env=plugin_environment(), initialize=hello) as hostd:
                browser = Browser(hostd)
                hostd.on_request = browser
                if document == DOCUMENT:
                    plugin = await approve(hostd, folder)
                status = await hostd.request("plugins/enable", {"id": plugin})
                assert status["status"] == "ready"
                await hostd.request("plugins/disable", {"id": plugin})
                urls += browser.urls
            async with httpx2.AsyncClient(trust_env=False) as http:
                await http.post(f"{origin}/test/expire")  # the next start meets a 401: a new authorization
        assert [client_id_of(url) for url in urls] == [DOCUMENT, moved]
        assert (await stats(origin))["registrations"] == 0


async def test_initialize_refuses_a_document_url_that_cannot_be_a_client_id(tmp_path: Path) -> None:
    # draft-ietf-oauth-client-id-metadata-document section 3: https, a path, no dot segment, no fragment, no
    # user name or password. Each is refused by name; the same process then takes a good one.
    bad = [
        ("http://app.example/client.json", "must be an absolute https URL"),
        ("https://app.example/", "must have a path"),
        ("https://app.example", "must have a path"),
        ("https://app.example/a/../client.json", "'.' or '..' path segment"),
        ("https://app.example/client.json#x", "must not have a fragment"),
        ("https://user:pw@app.example/client.json", "user name or password"),
        ("https://app.example/client json", "spaces or control characters"),
        ("https://app.example/" + "a" * 2048, "at most 2048 characters"),
        (7, "must be a string"),
    ]
    state = ["--state-dir", str(tmp_path / "state")]
    async with HostdClient.spawn(state, env=plugin_environment(), handshake=False) as hostd:
        for url, why in bad:
            with pytest.raises(RpcError) as refused:
                await hostd.request("initialize", {"oauth": {"clientIdMetadataDocument": url}})
            assert refused.value.kind == "INVALID_PARAMS"
            assert why in refused.value.message, refused.value.message
            assert refused.value.data["field"] == "oauth.clientIdMetadataDocument"
        with pytest.raises(RpcError) as refused:
            await hostd.request("initialize", {"oauth": {"clientId": DOCUMENT}})
        assert refused.value.data["field"] == "oauth.clientId"
        result = await hostd.request("initialize", {"oauth": {"clientIdMetadataDocument": DOCUMENT}})
        assert result["serverInfo"]["name"] == "hostd"


async def test_a_2025_03_26_server_is_authorized_with_the_metadata_at_its_origin(
    hostd: HostdClient, tmp_path: Path
) -> None:
    # No protected resource metadata: the authorization server is the MCP server's origin (MCP 2025-03-26,
    # "Authorization Base URL"); its metadata at <origin>/.well-known/oauth-authorization-server names the
    # issuer <origin>/oauth and endpoints under /oauth (the default /authorize, /token, /register are not
    # there). Before the fix: PLUGIN_START_FAILED, the SDK holding the issuer to the origin exactly.
    browser = Browser(hostd)
    hostd.on_request = browser
    async with oauth_server("--no-resource-metadata", "--metadata-issuer", "{origin}/oauth") as origin:
        plugin = await approve(hostd, remote_plugin(tmp_path, f"{origin}/mcp"))
        status = await hostd.request("plugins/enable", {"id": plugin})
        assert status["status"] == "ready"
        assert browser.urls[0].startswith(f"{origin}/oauth/authorize?")
        assert f"iss={quote(origin + '/oauth', safe='')}" in browser.callbacks[0]  # RFC 9207: held to it
        counts = await stats(origin)
        assert (counts["registrations"], counts["authorizations"], counts["codeGrants"]) == (1, 1, 1)
        result = await hostd.request("tools/call", {"name": "remote.echo", "arguments": {"text": "legacy"}})
        assert result["content"] == [{"type": "text", "text": "legacy"}]
        await hostd.request("plugins/disable", {"id": plugin})


#: Servers whose authorization server metadata names an issuer it is not held to. With protected resource
#: metadata naming the origin, metadata naming <origin>/oauth: held to the named issuer exactly, as before
#: (the 2025-03-26 rule does not apply). Without it, metadata at the origin naming another origin's issuer,
#: another port or another host (a mix-up: claiming another authorization server's identity).
MISMATCHED = [
    ("--metadata-issuer", "{origin}/oauth"),
    ("--no-resource-metadata", "--metadata-issuer", "http://127.0.0.1:1/oauth"),
    ("--no-resource-metadata", "--metadata-issuer", "https://auth.example.com"),
]


async def test_metadata_naming_another_issuer_is_refused(hostd: HostdClient, tmp_path: Path) -> None:
    hostd.on_request = Browser(hostd)
    for index, server in enumerate(MISMATCHED):
        async with oauth_server(*server) as origin:
            plugin = await approve(hostd, remote_plugin(tmp_path, f"{origin}/mcp", plugin_id=f"mismatched{index}"))
            with pytest.raises(RpcError) as failed:
                await hostd.request("plugins/enable", {"id": plugin})
            assert failed.value.kind == "PLUGIN_START_FAILED", server
            assert "Authorization server metadata issuer mismatch" in failed.value.message, failed.value.message
            counts = await stats(origin)
            assert (counts["registrations"], counts["authorizations"]) == (0, 0), server
    assert hostd.requests == []  # the parent was never asked to authorize
