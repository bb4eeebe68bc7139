"""hostctl's lifecycle verbs: ``list``, ``install``, ``import``, ``grant``, ``approve``, ``enable``,
``disable``, ``restart``, ``uninstall``. Each is ``async (client, opts, args) -> exit code``
(:data:`hostd.cli.hostctl.COMMANDS`).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trio
from rich.console import Console

from hostd.cli.client import HostdClient, RpcError
from hostd.cli.connection import (
    ENABLE_TIMEOUT,
    EXIT_FAILED,
    EXIT_OK,
    Failure,
    Options,
    check_not_foreign,
    disabled_tools,
    enable_plugin,
    find_plugin,
    prepare_if_needed,
    settle,
    show,
    with_progress,
)
from hostd.cli.render import (
    FEATURES_NOTE,
    STATUS_HEADER,
    VERSION_NOTE,
    as_typed,
    launch_details,
    make_console,
    next_action,
    next_command,
    next_step,
    package_name,
    package_text,
    permission_figures,
    plugin_version,
    print_info,
    print_json,
    print_next_for,
    print_table,
    say,
    status_row,
    terminal_safe,
    tool_count_note,
)
from hostd.net.allowlist import canonical_entries
from hostd.storage.secrets import SecretStore


async def cmd_list(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl list``: every installed plugin (after restore settled)."""
    plugins = await settle(client)
    if opts.as_json:
        print_json({"plugins": plugins})
        return EXIT_OK
    out = make_console()
    if not plugins:
        say(out, f"no plugins installed in {opts.state_dir}")
        next_step(out, "install one", "hostctl install PLUGIN_DIR  (or hostctl import CONFIG)")
        return EXIT_OK
    rows = []
    for info in plugins:
        launch = info.get("launch") or {}
        approved = "yes" if launch.get("approved") else ("unresolved" if "error" in launch else "no")
        granted, features = permission_figures(info)
        rows.append(
            [
                info["id"],
                plugin_version(info),
                package_name(info),
                info["status"],
                "yes" if info["enabled"] else "no",
                approved,
                granted,
                features,
                info["path"],
            ]
        )
    header = ["PLUGIN", "VERSION", "PACKAGE", "STATUS", "ENABLED", "APPROVED", "GRANTED", "FEATURES", "FOLDER"]
    print_table(out, header, rows)
    if any(row[7] != "-" for row in rows):
        say(out, FEATURES_NOTE)
    if any(row[1] == "unknown" for row in rows):
        say(out, as_typed(VERSION_NOTE))
    return EXIT_OK


async def cmd_install(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl install PLUGIN_DIR``: install (nothing runs); show what would run and what is next."""
    check_not_foreign(args.plugin_dir, opts.state_dir)
    await settle(client)
    folder = os.path.abspath(os.path.expanduser(args.plugin_dir))

    async def install() -> dict[str, Any]:
        info: dict[str, Any] = await client.request("plugins/install", {"path": folder}, timeout=ENABLE_TIMEOUT)
        return info

    info = await with_progress(client, f"installing {folder}", install)
    info = await prepare_if_needed(client, info)

    def human(out: Console) -> None:
        print_info(out, info)
        print_next_for(out, info)

    return show(opts, info, human)


#: Where the MCP clients hostctl knows keep their config (``hostctl import`` reads any of them), for the hint of
#: :func:`read_config`.
CLIENT_CONFIGS: tuple[tuple[str, str], ...] = (
    ("Claude Desktop (Linux)", "~/.config/Claude/claude_desktop_config.json"),
    ("Claude Desktop (macOS)", "~/Library/Application Support/Claude/claude_desktop_config.json"),
    ("Cursor", "~/.cursor/mcp.json"),
    ("VS Code (a workspace)", ".vscode/mcp.json"),
)


def read_config(config: str) -> str:
    """The text of the config ``hostctl import`` was given; raises :class:`Failure` ``CANNOT_READ`` naming the
    reason, where the known clients keep theirs (:data:`CLIENT_CONFIGS`, those found here first) and how to write
    one. Run by :func:`hostd.cli.hostctl.main` before any hostd starts (a missing file fails at once: the
    README's Claude Desktop path on a machine without it), and by :func:`cmd_import` (the text imported)."""
    try:
        return Path(config).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        found = [path for _, path in CLIENT_CONFIGS if os.path.isfile(os.path.expanduser(path))]
        known = "; ".join(f"{client}: {path}" for client, path in CLIENT_CONFIGS)
        details = [f"found here: {', '.join(found)}" if found else "found here: none of the known client configs"]
        details.append(f"the clients hostctl knows keep theirs at {known}")
        details.append(
            'or write your own: {"mcpServers": {"NAME": {"command": "python3", "args": ["/path/to/server.py"]}}} '
            "in a file, then " + as_typed("hostctl import FILE")
        )
        raise Failure("CANNOT_READ", f"cannot read {config}: {reason}", details) from None


async def cmd_import(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl import CONFIG``: install every server of an mcpServers config; say what to run next."""
    text = read_config(args.config)
    await settle(client)
    try:
        result = await client.request("plugins/import", {"config": text}, timeout=ENABLE_TIMEOUT)
    except RpcError as exc:
        entries = exc.data.get("entries") or []
        if entries and not opts.as_json:
            _import_table(make_console(stderr=True), entries)
        raise
    for entry in result["entries"]:  # npx/uvx servers: install their packages now, never at their start
        if entry.get("outcome") in ("installed", "updated") and "plugin" in entry:
            entry["plugin"] = await prepare_if_needed(client, entry["plugin"])
    if args.rewrite:
        result["rewrite"] = await _rewrite(opts, args, result["entries"])
    if opts.as_json:
        print_json(result)
        return EXIT_OK
    ids = [e["id"] for e in result["entries"] if e.get("id")]
    kept_secrets = any("in the secret store" in n for e in result["entries"] for n in e.get("notes") or [])
    out = make_console()
    _import_table(out, result["entries"])
    installed = [e["id"] for e in result["entries"] if e.get("outcome") in ("installed", "updated")]
    say(out, f"state folder: {opts.state_dir}")
    if kept_secrets:
        say(out, f"secret store: {_secret_store_place(opts.state_dir)}")
    if not installed:
        say(out, "nothing new was installed")
    # Every entry not yet running gets its next step, installed now or earlier (a second import
    # of the same config leaves them "unchanged", and still unapproved).
    plugins = {p["id"]: p for p in (await client.request("plugins/list", {}))["plugins"]}
    pending = [
        plugins[i] for i in ids if i in plugins and not (plugins[i]["enabled"] and plugins[i]["status"] == "ready")
    ]
    for info in pending:
        what, command = next_action(info)
        next_step(out, f"{info['id']}: {what}", command)
    to_approve = [info["id"] for info in pending if next_action(info)[1].startswith("hostctl approve")]
    if to_approve:
        say(
            out,
            "then start each once approved (an imported plugin's tools are pinned at that first start: a later change "
            "to them is withheld until you approve again):",
        )
        for plugin_id in to_approve:
            next_step(out, f"{plugin_id}: then start it", f"hostctl enable {plugin_id}")
    return EXIT_OK


def check_rewrite(config: str, yes: bool) -> int | None:
    """Before ``import --rewrite`` starts a hostd or imports anything: ``EXIT_FAILED`` (the reason printed) without
    a way to say yes (no terminal, no ``--yes``) or for a config that already starts ``hostd mcp`` (importing it
    would make the gateway its own plugin); ``None`` to go on (an unreadable config: the import says why)."""
    from hostd.cli import import_rewrite  # noqa: PLC0415 (import --rewrite only; not on a reading command's path)
    from hostd.install.importer import parse_jsonc  # noqa: PLC0415 (the same)

    failure = None
    if not yes and not sys.stdin.isatty():
        failure = Failure("NOT_CONFIRMED", "rewriting a config needs a yes: run it in a terminal, or pass --yes")
    else:
        try:
            _, table = import_rewrite.server_table(parse_jsonc(Path(config).read_text(encoding="utf-8")))
        except (OSError, ValueError, import_rewrite.RewriteError):
            return None
        for name, server in table.items():
            if import_rewrite.starts_hostd_mcp(server):
                undo = as_typed(f"hostctl import --undo {shlex.quote(config)}")
                failure = Failure(
                    "ALREADY_REWRITTEN", f"{config} already starts hostd mcp (entry {name!r}); {undo} restores it"
                )
                break
    if failure is None:
        return None
    print("\n".join(failure.lines()), file=sys.stderr)
    return EXIT_FAILED


async def _rewrite(opts: Options, args: argparse.Namespace, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """``import --rewrite``, after the import: show what changes, ask (unless ``--yes``), back up and rewrite.

    Returns ``{"config", "backup", "replaced", "entry"}`` (``--json`` prints it under ``rewrite``)."""
    from hostd.cli import import_rewrite  # noqa: PLC0415 (import --rewrite only; not on a reading command's path)

    config = Path(args.config)
    names = [e["name"] for e in entries if e.get("outcome") in ("installed", "updated", "unchanged")]
    try:
        old, new, notes = import_rewrite.plan(config, names, args.gateway)
    except import_rewrite.RewriteError as exc:
        raise Failure("CANNOT_REWRITE", str(exc)) from None
    err = make_console(stderr=True)
    say(err, f"{config}: {', '.join(names)} will start as one entry: {shlex.join(args.gateway)}")
    for note in notes:
        say(err, note)
    if not opts.yes:
        answer = await trio.to_thread.run_sync(_ask, f"Back up and rewrite {config}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            raise Failure("NOT_CONFIRMED", f"{config} was not rewritten (the servers stay imported)")
    try:
        backup = await trio.to_thread.run_sync(import_rewrite.apply, config, old, new)
    except import_rewrite.RewriteError as exc:
        raise Failure("CANNOT_REWRITE", str(exc)) from None
    undo = as_typed(f"hostctl import --undo {shlex.quote(args.config)}")
    say(err, f"rewrote {config}; its backup: {backup}; undo: {undo}")
    return {"config": str(config), "backup": str(backup), "replaced": names, "command": list(args.gateway)}


def undo_rewrite(config: str) -> int:
    """``hostctl import --undo CONFIG``: put back the config ``import --rewrite`` backed up (no hostd needed)."""
    from hostd.cli import import_rewrite  # noqa: PLC0415 (import --undo only; not on a reading command's path)

    try:
        backup = import_rewrite.undo(Path(config))
    except import_rewrite.RewriteError as exc:
        print("\n".join(Failure("CANNOT_UNDO", str(exc)).lines()), file=sys.stderr)
        return EXIT_FAILED
    say(make_console(), f"restored {config} from {backup}")
    return EXIT_OK


def _secret_store_place(state_dir: str) -> str:
    """Where hostd keeps this state folder's secret values: the OS keyring, or the 0600 file."""
    try:
        store = SecretStore(Path(state_dir))
    except Exception:
        return "unknown (the secret store cannot be opened)"
    if store.backend == "keyring":
        return f"the OS keyring (the names only in {store.path})"
    return f"{store.path} (mode 0600, readable by you only)"


def _import_table(console: Console, entries: Sequence[Mapping[str, Any]]) -> None:
    """The import's table; the network note every imported local server gets (issue 26) is said once, under it."""
    rows = [
        [
            e.get("name"),
            e.get("outcome"),
            e.get("id") or "-",
            package_text(e["plugin"]) if isinstance(e.get("plugin"), Mapping) else "-",
            "; ".join(
                [
                    *([e["message"]] if e.get("message") else []),
                    *(n for n in e.get("notes") or [] if not n.startswith(_NETWORK_NOTE)),
                ]
            ),
        ]
        for e in entries
    ]
    print_table(console, ["NAME", "OUTCOME", "PLUGIN", "PACKAGE", "NOTES"], rows)
    fenced = [str(e["id"]) for e in entries if any(n.startswith(_NETWORK_NOTE) for n in e.get("notes") or [])]
    if fenced:
        say(
            console,
            f"network hosts of {', '.join(fenced)}: none yet; each host one asks for is asked of you (hostctl call "
            "asks in the terminal) or refused; hostctl grant ID --host HOST lets one through",
        )


#: The start of hostd.install.importer.IMPORTED_NETWORK_NOTE (not imported: hostctl's start stays light).
_NETWORK_NOTE = "network hosts: "


async def cmd_grant(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl grant ID [PERMISSION ...] [--all] [--host HOST ...] [--revoke-host HOST ...]``: replace the
    granted permissions; add or take back network hosts (``plugins/grant networkHosts``, issue 26). With only
    ``--host`` / ``--revoke-host`` the granted permissions stay as they are."""
    info = find_plugin(await settle(client), args.id)
    hosts_given = bool(args.host or args.revoke_host)
    permissions = list(info["permissions"]) if args.all else list(args.permissions)
    if not args.all and not permissions:
        if not hosts_given:
            raise Failure(
                "USAGE",
                f"name the permissions to grant, or --all (it declares: {', '.join(info['permissions']) or 'none'})",
            )
        permissions = list(info["granted"])
    params: dict[str, Any] = {"id": args.id, "permissions": permissions}
    if hosts_given:
        revoked = set(canonical_entries(args.revoke_host))
        kept = [h for h in info.get("networkHosts") or [] if h not in revoked]
        params["networkHosts"] = [*kept, *args.host]  # hostd checks every entry and names a bad one
        answered = info.get("networkCallHosts") or []
        if revoked & set(answered):  # an 'always' answer to network/request is taken back the same way
            params["networkCallHosts"] = [h for h in answered if h not in revoked]
    info = await client.request("plugins/grant", params)

    def human(out: Console) -> None:
        say(out, f"{args.id}: granted {', '.join(info['granted']) or 'nothing'}")
        if hosts_given:
            say(out, f"{args.id}: network hosts granted: {', '.join(info.get('networkHosts') or []) or 'none'}")
        print_next_for(out, info)

    return show(opts, info, human)


async def cmd_allow(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl allow ID PATH [--write] [--revoke]``: a call-time grant for good (``plugins/grantPath``), or
    take one back (``plugins/revokePath``)."""
    find_plugin(await settle(client, [args.id]), args.id)
    path = os.path.abspath(os.path.expanduser(args.path))
    if args.revoke:
        info = await client.request("plugins/revokePath", {"id": args.id, "path": path})
    else:
        access = "write" if args.write else "read"
        info = await client.request("plugins/grantPath", {"id": args.id, "path": path, "access": access})

    def human(out: Console) -> None:
        done = "no longer reaches" if args.revoke else ("may read and write" if args.write else "may read")
        say(out, f"{args.id} {done} {terminal_safe(path, one_line=True)}")

    return show(opts, info, human)


def ask_grant_in_terminal(params: Mapping[str, Any]) -> str:
    """Ask on the terminal whether a tool call may reach the files hostd's ``grants/request`` names;
    ``"once"``, ``"always"`` or ``"no"`` (the default; an unreadable stdin is a no). Blocking: run it in a
    worker thread."""
    print(f"{terminal_safe(str(params.get('tool')), one_line=True)} wants to reach:", file=sys.stderr)
    for item in params.get("paths") or []:
        kind = "read and write" if item.get("access") == "write" else "read"
        print(f"  {terminal_safe(str(item.get('path')), one_line=True)} ({kind})", file=sys.stderr)
    answer = _ask("Allow? [o]nce / [a]lways / [N]o: ").strip().lower()
    return {"o": "once", "once": "once", "a": "always", "always": "always"}.get(answer, "no")


def ask_network_in_terminal(params: Mapping[str, Any]) -> str:
    """Ask on the terminal whether a plugin may connect to the destination hostd's ``network/request`` names
    (issue 26); ``"once"``, ``"always"`` or ``"no"`` (the default; an unreadable stdin is a no). Blocking."""
    plugin = terminal_safe(str(params.get("plugin")), one_line=True)
    where = terminal_safe(f"{params.get('host')}:{params.get('port')}", one_line=True)
    kind = params.get("addressKind")
    if isinstance(kind, str):  # a non-public address: say what a yes reaches (hostd/host/network_grants.py)
        where += terminal_safe(f" (a {kind} address{': this machine' if kind == 'loopback' else ''})", one_line=True)
    print(f"{plugin} wants to connect to {where}, which its network allowlist does not name", file=sys.stderr)
    answer = _ask("Allow? [o]nce / [a]lways / [N]o: ").strip().lower()
    return {"o": "once", "once": "once", "a": "always", "always": "always"}.get(answer, "no")


#: One question on the terminal at a time (a tool call may need a file and a host at once).
_TERMINAL = trio.Lock()


async def answer_grants(method: str, params: dict[str, Any]) -> Any:
    """``hostctl call``'s answer to hostd's requests: ``grants/request`` and ``network/request`` asked in the
    terminal (:func:`ask_grant_in_terminal`, :func:`ask_network_in_terminal`), one at a time; any other request
    is refused (-32601)."""
    asks = {"grants/request": ask_grant_in_terminal, "network/request": ask_network_in_terminal}
    if method not in asks:
        raise RpcError({"code": -32601, "message": f"hostctl does not answer {method}"})
    async with _TERMINAL:
        return {"grant": await trio.to_thread.run_sync(asks[method], params)}


async def cmd_approve(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl approve ID [--yes]``: show the whole launch, ask, approve its digest."""
    info = find_plugin(await settle(client), args.id)
    launch = info.get("launch") or {}
    err = make_console(stderr=True)
    if "digest" not in launch:
        raise Failure(
            str(launch.get("kind") or "LAUNCH_UNRESOLVED"),
            f"the launch of {args.id} cannot be resolved: {launch.get('error', 'unknown')}",
            [f"next: {as_typed(str(next_command('LAUNCH_UNRESOLVED', {'plugin': args.id}, str(info['path']))))}"],
        )
    say(err, f"{args.id} would run:", style="bold")
    print_table(err, ["", ""], launch_details(info))
    if not opts.yes:
        if not sys.stdin.isatty():
            raise Failure("NOT_APPROVED", "approving needs a yes: run it in a terminal, or pass --yes")
        answer = await trio.to_thread.run_sync(_ask, f"Approve this launch of {args.id}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            raise Failure("NOT_APPROVED", f"the launch of {args.id} was not approved")
    info = await client.request("plugins/approve", {"id": args.id, "digest": launch["digest"]})
    refused_for_approval = False
    if info.get("enabled") and info.get("status") == "error":
        # A recorded failure that was the approval's own refusal ("approve this exact launch first") is what this
        # approval answers: what is next is a start with it (a new user's walk met "see why its start failed").
        # Any other failure (a rejected listing, a crash) is not: its log says why.
        error = (await client.request("plugins/status", {"id": args.id})).get("error") or {}
        refused_for_approval = "approve" in f"{error.get('message', '')} {error.get('reason', '')}"

    def human(out: Console) -> None:
        say(out, f"{args.id}: approved {launch['digest']}")
        if refused_for_approval:
            next_step(out, "start it with this approval", f"hostctl enable {args.id}")
        else:
            print_next_for(out, info)

    return show(opts, info, human)


def _ask(prompt: str) -> str:
    print(prompt, end="", file=sys.stderr, flush=True)
    try:
        return sys.stdin.readline()
    except OSError:
        return ""


async def _set_tool(client: HostdClient, opts: Options, name: str, enabled: bool) -> int:
    await settle(client, [name.partition(".")[0]])
    result = await client.request("tools/setEnabled", {"name": name, "enabled": enabled})
    if opts.as_json:
        print_json(result)
    else:
        # Only a hostd that was already serving the folder runs the plugin; this command's own starts none.
        after = "the plugin keeps running" if getattr(client, "attached", True) else "kept for the plugin's next start"
        say(make_console(), f"tool {result['name']}: {'enabled' if enabled else 'disabled'} ({after})")
    return EXIT_OK


async def cmd_enable(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl enable ID`` (start it now, also after a failed start; later, a hostd serving the folder starts it
    at its start-up, a hostctl command when it uses it) or ``enable ID.TOOL``."""
    if "." in args.id:
        return await _set_tool(client, opts, args.id, True)
    plugins = await settle(client, [args.id])
    info = await prepare_if_needed(client, find_plugin(plugins, args.id))  # npx, uvx: the packages first
    if info["status"] == "ready" and info["enabled"]:
        status = await client.request("plugins/status", {"id": args.id})
    else:
        status = await enable_plugin(client, args.id)
    if opts.as_json:
        print_json(status)
        return EXIT_OK
    out = make_console()
    hidden = (await disabled_tools(client, args.id)).get(args.id, 0)
    print_table(out, STATUS_HEADER, [status_row(status, True, hidden)])
    note = tool_count_note(info, status)  # the count at install was the manifest's: say why this one differs
    if note is not None:
        say(out, note)
    next_step(out, "see its tools", f"hostctl tools {args.id}")
    return EXIT_OK


async def cmd_disable(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl disable ID`` (stop it; not started again) or ``disable ID.TOOL``."""
    if "." in args.id:
        return await _set_tool(client, opts, args.id, False)
    await settle(client, [args.id])
    status = await client.request("plugins/disable", {"id": args.id}, timeout=ENABLE_TIMEOUT)
    if opts.as_json:
        print_json(status)
    else:
        say(make_console(), f"{args.id}: {status['status']}, disabled")
    return EXIT_OK


async def cmd_restart(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl restart ID``: stop and start an enabled plugin."""
    info = find_plugin(await settle(client, [args.id]), args.id)
    if not info["enabled"]:  # hostd's answer says "enable it instead": name the command
        raise Failure(
            "PLUGIN_STATE_CONFLICT",
            f"{args.id} is not enabled: there is nothing to restart",
            [f"next: {as_typed(f'hostctl enable {args.id}')}"],
        )

    async def restart() -> dict[str, Any]:
        status: dict[str, Any] = await client.request("plugins/restart", {"id": args.id}, timeout=ENABLE_TIMEOUT)
        return status

    status = await with_progress(client, f"restarting {args.id}", restart, plugins=[args.id])
    if opts.as_json:
        print_json(status)
    else:
        hidden = (await disabled_tools(client, args.id)).get(args.id, 0)
        print_table(make_console(), STATUS_HEADER, [status_row(status, True, hidden)])
    return EXIT_OK


async def cmd_uninstall(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl uninstall ID``: stop it and forget it (its data folder is kept)."""
    await settle(client, [args.id])
    await client.request("plugins/uninstall", {"id": args.id}, timeout=ENABLE_TIMEOUT)
    if opts.as_json:
        print_json(None)
    else:
        say(make_console(), f"{args.id}: uninstalled")
    return EXIT_OK
