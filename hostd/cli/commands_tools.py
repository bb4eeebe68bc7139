"""hostctl's verbs that look at and use running plugins: ``status``, ``show``, ``tools``, ``call``, ``logs``.
Each is ``async (client, opts, args) -> exit code`` (:data:`hostd.cli.hostctl.COMMANDS`).
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Mapping
from typing import Any

from rich.console import Console

from hostd.cli.client import HostdClient
from hostd.cli.connection import (
    CALL_TIMEOUT,
    EXIT_FAILED,
    EXIT_OK,
    Options,
    check_not_foreign,
    disabled_tools,
    enable_plugin,
    find_plugin,
    is_folder_argument,
    prepare,
    prepare_if_needed,
    resolve_tool,
    settle,
)
from hostd.cli.remedies import rejection_remedy
from hostd.cli.render import (
    STATUS_HEADER,
    as_typed,
    cli_words,
    content_text,
    make_console,
    next_command,
    next_step,
    print_info,
    print_json,
    print_next_for,
    print_table,
    say,
    shorten,
    show_rows,
    status_row,
    terminal_safe,
)


async def cmd_status(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl status [ID ...]``: each plugin's status once restore settled.

    Exit 1 when an enabled plugin is not ``ready`` (each one's reason on stderr).
    """
    plugins = await settle(client, args.ids or None)
    chosen = [find_plugin(plugins, i) for i in args.ids] if args.ids else plugins
    statuses = [await client.request("plugins/status", {"id": info["id"]}) for info in chosen]
    enabled = {info["id"]: bool(info["enabled"]) for info in chosen}
    infos = {info["id"]: info for info in chosen}
    # Enabled and stopped is no fault where this command's own hostd answers: it starts no plugin (--no-restore).
    fine = ("ready",) if getattr(client, "attached", True) else ("ready", "stopped")
    broken = [s for s in statuses if enabled[s["plugin_id"]] and s["status"] not in fine]
    if opts.as_json:
        print_json({"plugins": statuses})
    else:
        out = make_console()
        hidden = await disabled_tools(client) if statuses else {}
        if not statuses:
            say(out, f"no plugins installed in {opts.state_dir}")
        else:
            print_table(
                out,
                STATUS_HEADER,
                [status_row(s, enabled[s["plugin_id"]], hidden.get(s["plugin_id"], 0)) for s in statuses],
            )
    err = make_console(stderr=True)
    for status in broken:
        row = status_row(status)
        say(err, f"error: {row[0]} is enabled but {row[1]}{': ' + row[-1] if row[-1] else ''}")
        error = status.get("error")
        if isinstance(error, Mapping):
            remedy, fix = rejection_remedy(infos[status["plugin_id"]], error)  # a listing hostd refused
            for line in remedy:
                say(err, f"  {line}")
            fix = fix or next_command(str(error.get("kind")), error, str(infos[status["plugin_id"]]["path"]))
            if fix is not None:
                say(err, f"  next: {as_typed(fix)}")
    return EXIT_FAILED if broken else EXIT_OK


async def cmd_tools(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl tools [ID]``: the tools of the running plugins, disabled ones included."""
    await settle(client, [args.id] if args.id else None)
    params: dict[str, Any] = {"includeDisabled": True}
    if args.id:
        params["plugin"] = args.id
    listing = await client.request("tools/list", params)
    if opts.as_json:
        print_json(listing)
        return EXIT_OK
    out = make_console()
    tools = listing["tools"]
    if not tools:
        if not getattr(client, "attached", True):  # this command's own hostd starts no plugin (issue 28)
            await _print_declared_tools(client, out, args.id)
            return EXIT_OK
        say(out, "no tools: only running plugins have tools")
        next_step(out, "start a plugin", "hostctl enable ID")
        return EXIT_OK
    rows = [
        [
            t["name"],
            "yes" if t.get("enabled", True) else "no",
            t.get("permission") or "-",
            shorten((t.get("description") or "").split("\n")[0], 70),
        ]
        for t in tools
    ]
    print_table(out, ["TOOL", "ENABLED", "PERMISSION", "DESCRIPTION"], rows)
    return EXIT_OK


async def _print_declared_tools(client: HostdClient, out: Console, plugin_id: str | None) -> None:
    """What ``hostctl tools`` shows when its own hostd runs no plugin (reading commands start none, issue
    28): the tools each enabled plugin's manifest declares (``PluginInfo.tools``) and, for a server whose manifest
    declares none (an imported one), those its first discovery pinned (``PluginInfo.pinnedTools``), each said to be
    which, with how to use one; a plugin with neither lists its tools once it runs, and the hint starts it."""
    plugins = (await client.request("plugins/list", {}))["plugins"]
    chosen = [p for p in plugins if p["enabled"] and (plugin_id is None or p["id"] == plugin_id)]
    # Host names already (``mcp-echo.echo``): shown as they are, as a running plugin's are. Whether each is
    # enabled is the user's setting, kept in the state (``PluginInfo.disabledTools``).
    rows = []
    for p in chosen:
        declared = list(p["tools"])
        recorded = [name for name in p.get("pinnedTools") or [] if name not in declared]
        for name, where in [(n, "declared in its manifest") for n in declared] + [
            (n, "recorded at its first start") for n in recorded
        ]:
            rows.append([name, "no" if name in (p.get("disabledTools") or []) else "yes", "-", where])
    if rows:
        print_table(out, ["TOOL", "ENABLED", "PERMISSION", "DESCRIPTION"], rows)
        say(out, "the tools the manifests declare or a first start recorded: this hostctl command starts no plugin,")
        say(out, "and a running plugin lists its own, with their descriptions. Use one (starts its plugin):")
        plugin, _, tool = rows[0][0].partition(".") if plugin_id is not None else ("ID", "", "TOOL")
        say(out, as_typed(f"hostctl call {plugin} {tool} 'ARGUMENTS AS JSON'"))
        return
    say(out, "no tools to show: this hostctl command starts no plugin, and a server whose manifest declares no tool")
    say(out, "lists its own once it runs (they are recorded at its first start).")
    if plugin_id is not None and any(p["id"] == plugin_id for p in chosen):
        next_step(out, "start it", f"hostctl enable {plugin_id}")
    else:
        say(out, "Use one (starts its plugin):")
        say(out, as_typed("hostctl call ID TOOL 'ARGUMENTS AS JSON'"))


async def cmd_show(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl show ID``: one plugin in full -- what ``list`` shows, its whole launch (:func:`print_info`, as
    ``install`` shows it), then :func:`show_rows`: network hosts, features, its tools, the last start's error, the
    state folder. A reading command (starts nothing). ``--json``: ``{plugin, status, tools}``."""
    info = find_plugin(await settle(client, [args.id]), args.id)
    status = await client.request("plugins/status", {"id": args.id})
    tools = (await client.request("tools/list", {"plugin": args.id, "includeDisabled": True}))["tools"]
    if opts.as_json:
        print_json({"plugin": info, "status": status, "tools": tools})
        return EXIT_OK
    out = make_console()
    print_info(out, info, show_rows(info, status, tools, opts.state_dir))
    print_next_for(out, info)
    return EXIT_OK


async def ensure_ready(client: HostdClient, target: str, opts: Options) -> str:
    """The id of a ready plugin for ``target`` (a plugin id, or a plugin folder).

    Waits for hostd's restore first and never reinstalls an installed plugin (a
    restored plugin raced the reinstall: ``PLUGIN_STATE_CONFLICT``). A folder not yet
    installed is installed, every declared permission granted and the shown launch
    approved (printed on stderr: the person running ``call`` on a folder approves it),
    then enabled. An installed plugin that is not ready is enabled as it is: a missing
    grant or approval is reported with the command that gives it.
    """
    plugins = await settle(client)
    if is_folder_argument(target):
        check_not_foreign(target, opts.state_dir)
        folder = os.path.abspath(os.path.expanduser(target))
        found = [p for p in plugins if p["path"] in (folder, os.path.realpath(folder))]
        if not found:
            info, _ = await prepare(client, folder)
            return str(info["id"])
        info = found[0]
    else:
        info = find_plugin(plugins, target)
    plugin_id = str(info["id"])
    if info["status"] == "ready":
        return plugin_id
    await prepare_if_needed(client, info)  # npx, uvx: the packages first (its approval then names them)
    await enable_plugin(client, plugin_id)
    return plugin_id


async def cmd_call(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl call PLUGIN TOOL [JSON_ARGS]``: print the tool's text (``--json``: the whole result)."""
    plugin_id = await ensure_ready(client, args.plugin, opts)
    name = await resolve_tool(client, plugin_id, args.tool)
    params: dict[str, Any] = {"name": name, "arguments": args.arguments}
    if args.timeout is not None:
        params["timeoutMs"] = max(1, math.ceil(args.timeout * 1000))
    bound = args.timeout + 10 if args.timeout is not None else CALL_TIMEOUT
    result: dict[str, Any] = await client.request("tools/call", params, timeout=bound)
    if opts.as_json:
        print_json(result)
    else:
        print(terminal_safe(content_text(result)))
    return EXIT_OK


async def cmd_logs(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl logs ID``: the plugin's recent log lines (those of this hostd: its restore included)."""
    info = find_plugin(await settle(client, [args.id]), args.id)
    result = await client.request("plugins/logs", {"id": args.id, "limit": args.limit})
    if opts.as_json:
        print_json(result)
        return EXIT_OK
    out = make_console()
    if not result["lines"]:
        # True in every state: the lines are kept in the state folder across hostd processes (one per hostctl
        # command), bounded, from the plugin's install on; an empty answer means it never wrote one.
        if info["enabled"]:
            say(
                out,
                f"{args.id}: no log lines: it has written nothing to stderr and sent no MCP log message since it "
                f"was installed ({info['status']})",
            )
        else:
            say(out, f"{args.id}: no log lines: it has not written any since it was installed (it is not enabled)")
            next_step(out, "see its start-up lines", f"hostctl enable {args.id}")
        return EXIT_OK
    for line in result["lines"]:
        message = cli_words(str(line["message"]), {"plugin": args.id}) if line["source"] == "host" else line["message"]
        text = f"{line['time']} {line['source']:<6} {line['level']:<7} {message}"
        say(out, terminal_safe(text, one_line=True))  # one line each: a message cannot forge the next
    if result["dropped"]:
        say(out, f"({result['dropped']} older lines dropped)")
    return EXIT_OK
