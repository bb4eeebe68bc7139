"""``hostctl``: the parent side of hostd on the command line, for people and scripts.

Every command works on ONE state folder, the user's (``platformdirs``; ``--state-dir``
overrides it, for every command alike), and drives a hostd over the control protocol exactly
as an embedding application would (:func:`hostd.cli.connection.open_hostd`): the hostd already
serving that folder when one listens on its control socket (an application's sidecar; its
restore is waited for, :func:`hostd.cli.connection.settle`), else a real ``hostd serve
--no-restore`` of its own through :class:`hostd.cli.client.HostdClient` (with
:func:`hostd.cli.client.plugin_environment`, so a manifest's bare ``python3`` is this
interpreter), which starts no plugin unless the command needs one, shut down cleanly before
exiting; a reading command (:data:`READING`) instead reads the folder in this process with hostd's own
code (:mod:`hostd.cli.direct`: no lock, nothing written); ``doctor`` reads it with no host at all
(:func:`hostd.cli.hostd.doctor`, as ``hostd doctor`` does: a hostd would repair the folder before it is looked at).
It says which on stderr, in one line.

``list``, ``install DIR``, ``import CONFIG``, ``grant ID [PERM...|--all]``,
``approve ID [--yes]``, ``enable ID|ID.TOOL`` (an npx/uvx plugin's packages installed first),
``disable ID|ID.TOOL``, ``restart ID``,
``status [ID...]``, ``show ID``, ``tools [ID]``, ``call PLUGIN TOOL [JSON_ARGS]``, ``logs ID``,
``uninstall ID``, ``doctor``: the lifecycle, one verb per step, each printing a table (``rich``) or,
with ``--json``, the protocol's JSON result, and naming the next command to run.
``approve`` shows the whole launch and asks (``--yes``: does not ask; without a
terminal and without ``--yes`` it refuses); so does ``import --rewrite``, which then makes the client config start
``hostd mcp`` (:mod:`hostd.cli.import_rewrite`; ``import --undo`` puts the backup back, with no hostd).
``call`` takes an id or a folder; a folder
not yet installed is installed, granted, approved (the launch printed to stderr: the
person running ``call`` approves it) and enabled; an installed plugin is never
installed again. Long waits (install, enable, restart, the restore) show progress on
stderr (:func:`hostd.cli.connection.with_progress`).
``hostctl demo [--no-real]``
    walk the bundled echo fixture (and the catalog's ``server-everything``)
    through the whole lifecycle, printing every exchange (a temporary state folder).

Exit codes: 0 success, 1 a failure reported by hostd (or hostd gone), 2 usage; a non-zero
exit always prints ``error: KIND: message`` on stderr, then ``next: <hostctl command>`` when
hostctl has a verb that fixes it (:data:`hostd.cli.render.NEXT_COMMANDS`; a server hostd rejected for
its tool listing: :func:`hostd.cli.remedies.rejection_remedy`). hostd's advice that names a control
method is shown with hostctl's command instead (:func:`hostd.cli.render.cli_words`). Every printed
command runs word for word: hostctl as the user invoked it (``.venv/bin/hostctl``, ``python -m
hostd.cli.hostctl``; :func:`hostd.cli.render.invoked_as`) and the ``--state-dir`` they gave.

Where the code lives: this module parses the command line and dispatches (:data:`COMMANDS`,
:func:`main`); the verbs are in :mod:`hostd.cli.commands_plugins` and :mod:`hostd.cli.commands_tools`,
the hostd they drive (start, failures, progress, restore) in :mod:`hostd.cli.connection`, what is printed
for people in :mod:`hostd.cli.render`, and ``demo`` in :mod:`hostd.cli.demo`.

Everything printed that a plugin or a manifest controls (launch arguments,
server info, tool names and results, error messages, stderr tails, config
names) goes through :func:`hostd.cli.render.terminal_safe` first: a control character or a
bidirectional override reaches the terminal as a visible escape, never as a
command (issue 10: an escape sequence in an argument could hide what is
being approved).
"""

from __future__ import annotations

# isort: off
from hostd.cli import _loading  # first: no garbage collection while the rest loads (see the module)

# isort: on
import argparse
import gc
import json
import math
import os
import shlex
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NoReturn

import trio

from hostd import __version__
from hostd.cli import direct
from hostd.cli.client import HostdClient, RpcError
from hostd.cli.commands_plugins import (
    answer_grants,
    check_rewrite,
    cmd_allow,
    cmd_approve,
    cmd_disable,
    cmd_enable,
    cmd_grant,
    cmd_import,
    cmd_install,
    cmd_list,
    cmd_restart,
    cmd_uninstall,
    read_config,
    undo_rewrite,
)
from hostd.cli.commands_tools import cmd_call, cmd_logs, cmd_show, cmd_status, cmd_tools
from hostd.cli.connection import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    HOSTD_FAILURES,
    REQUEST_TIMEOUT,
    Failure,
    Options,
    open_hostd,
)
from hostd.cli.demo import ECHO_PLUGIN, REAL_PLUGIN, relative_path, run_demo
from hostd.cli.remedies import rejection_remedy
from hostd.cli.render import as_typed, invoked_as, next_command, set_typed
from hostd.storage.state import default_state_dir

Command = Callable[[HostdClient, Options, argparse.Namespace], Awaitable[int]]

COMMANDS: dict[str, Command] = {
    "list": cmd_list,
    "install": cmd_install,
    "import": cmd_import,
    "grant": cmd_grant,
    "allow": cmd_allow,
    "approve": cmd_approve,
    "enable": cmd_enable,
    "disable": cmd_disable,
    "restart": cmd_restart,
    "status": cmd_status,
    "show": cmd_show,
    "tools": cmd_tools,
    "call": cmd_call,
    "logs": cmd_logs,
    "uninstall": cmd_uninstall,
}


#: The commands that only read: answered without a hostd when none serves the folder (hostd/cli/direct.py).
#: ``doctor`` reads too, with no hostd at all (:func:`hostd.cli.hostd.doctor`, in :func:`main`).
READING: frozenset[Command] = frozenset({cmd_list, cmd_status, cmd_show, cmd_tools, cmd_logs})


async def run_command(command: Command, opts: Options, args: argparse.Namespace) -> int:
    """Start hostd on ``opts.state_dir``, run ``command``, shut hostd down; report a failure
    as ``error: KIND: message`` on stderr (exit 1): a non-zero exit always says why."""
    try:
        # hostctl call asks in the terminal for a file the call names (hostd/host/call_grants.py).
        ask = answer_grants if command is cmd_call and sys.stdin.isatty() else None
        reader = direct.reader if command in READING else None
        async with open_hostd(opts.state_dir, ask_grants=ask, reader=reader) as client:
            try:
                return await command(client, opts, args)
            except RpcError as exc:
                raise await _with_next_step(client, exc) from None
    except (Failure, *HOSTD_FAILURES) as exc:
        failure = Failure.from_exception(exc)
        if failure.kind == "PLUGIN_NOT_FOUND" and opts.state_dir not in failure.message:
            failure.message += f"; state folder searched: {opts.state_dir}"
        print("\n".join(failure.lines()), file=sys.stderr)
        return EXIT_USAGE if failure.kind == "USAGE" else EXIT_FAILED


async def _with_next_step(client: HostdClient, exc: RpcError) -> Failure:
    """``exc`` as a :class:`Failure` ending with ``next: <hostctl command>`` when :data:`hostd.cli.render.NEXT_COMMANDS`
    has one for it (the plugin's folder is asked of hostd, which is still running)."""
    failure = Failure.from_exception(exc)
    plugin = exc.data.get("plugin")
    info: dict[str, Any] = {}
    if isinstance(plugin, str):
        with trio.move_on_after(REQUEST_TIMEOUT):
            try:
                listed = await client.request("plugins/list", {})
                info = next((p for p in listed["plugins"] if p["id"] == plugin), {})
            except HOSTD_FAILURES:
                info = {}
    command = next_command(failure.kind, exc.data, str(info["path"]) if info else None)
    remedy, fix = rejection_remedy(info or {"id": plugin}, exc.data)  # a listing hostd refused: another release
    failure.details.extend(remedy)
    command = fix or command
    if command is not None:
        failure.details.append(f"next: {as_typed(command)}")
    return failure


# -- command line ----------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``hostctl``: one subcommand per verb (:data:`COMMANDS`) and ``demo``.

    ``--state-dir`` and ``--json`` are accepted before or after the verb.
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--state-dir",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="hostd's state folder (default: the user's, from platformdirs, the same for every command)",
    )
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print the protocol's JSON result"
    )
    parser = argparse.ArgumentParser(
        prog="hostctl",
        description="Manage the MCP plugins of a hostd state folder, through the hostd serving it, else one of the "
        "command's own that starts only the plugins the command uses (list, status, show, tools and logs read the "
        "folder without one; doctor needs none).",
        epilog="Every command but demo takes --state-dir DIR (default: the user's state folder, "
        f"{default_state_dir()}) and --json (print the protocol's JSON result). Exit codes: 0 done, 1 failed "
        "(the reason on stderr), 2 usage.",
    )
    parser.add_argument("--version", action="version", version=f"hostctl {__version__}")
    parser.add_argument("--state-dir", metavar="DIR", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", default=False, help=argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_verbs(commands, common)
    demo = commands.add_parser(
        "demo",
        help="walk the bundled echo plugin (and a real MCP server) through the whole lifecycle",
        description="install -> grant -> approve -> enable -> tools/list -> call -> cancel -> restart -> disable, "
        f"on {relative_path(ECHO_PLUGIN)} and, unless --no-real, {relative_path(REAL_PLUGIN)}, with a temporary state "
        "folder.",
    )
    demo.add_argument("--no-real", action="store_true", help="skip the real third-party server")
    return parser


def _add_verbs(commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """One subparser per verb of :data:`COMMANDS`, each taking the ``common`` options."""

    def verb(name: str, summary: str, description: str | None = None) -> argparse.ArgumentParser:
        return commands.add_parser(name, parents=[common], help=summary, description=description or summary)

    verb("list", "list the installed plugins")
    verb("install", "install a plugin folder (nothing runs yet)").add_argument(
        "plugin_dir", metavar="PLUGIN_DIR", help="a folder holding plugin.yaml or plugin.json"
    )
    imports = verb(
        "import",
        "install the servers of an mcpServers config (Claude Desktop, Cursor, VS Code...)",
        "Install every server of CONFIG (mcpServers / servers JSON, comments allowed) as a plugin; all or nothing. "
        "With --rewrite, then (after a backup and your yes) make CONFIG start one hostd mcp instead of each "
        "imported server; --undo CONFIG puts the backup back.",
    )
    imports.add_argument("config", metavar="CONFIG", help="the config file")
    imports.add_argument(
        "--rewrite", action="store_true", help="after the import, make CONFIG start hostd mcp (asks; a backup first)"
    )
    imports.add_argument("--undo", action="store_true", help="restore CONFIG from its newest --rewrite backup")
    imports.add_argument("--yes", "-y", action="store_true", help="rewrite without asking")
    grant = verb("grant", "grant permissions a plugin declares (replaces what was granted)")
    grant.add_argument("id", metavar="ID")
    grant.add_argument("permissions", metavar="PERMISSION", nargs="*")
    grant.add_argument("--all", action="store_true", help="every permission the plugin declares")
    grant.add_argument(
        "--host",
        metavar="HOST",
        action="append",
        default=[],
        help="also let it reach HOST (name, *.suffix or address, optional :PORT) through hostd's proxy",
    )
    grant.add_argument(
        "--revoke-host", metavar="HOST", action="append", default=[], help="take back a host granted with --host"
    )
    allow = verb("allow", "let a plugin reach a file or folder for good (what a tool call asks for)")
    allow.add_argument("id", metavar="ID")
    allow.add_argument("path", metavar="PATH", help="an existing file or folder")
    allow.add_argument("--write", action="store_true", help="read and write (default: read only)")
    allow.add_argument("--revoke", action="store_true", help="take the grant back")
    approve = verb("approve", "show a plugin's whole launch and approve it")
    approve.add_argument("id", metavar="ID")
    approve.add_argument("--yes", "-y", action="store_true", help="approve without asking")
    verb("enable", "start a plugin (and at every later command), or enable one tool (ID.TOOL)").add_argument(
        "id", metavar="ID|ID.TOOL"
    )
    verb("disable", "stop a plugin for good, or hide one tool (ID.TOOL) without stopping it").add_argument(
        "id", metavar="ID|ID.TOOL"
    )
    verb("restart", "restart an enabled plugin").add_argument("id", metavar="ID")
    verb("status", "the status of the plugins (exit 1 when an enabled one is not ready)").add_argument(
        "ids", metavar="ID", nargs="*"
    )
    verb(
        "show",
        "one plugin in full: its launch, package and version, grants, network hosts, tools, last start error",
    ).add_argument("id", metavar="ID")
    verb("tools", "list the tools of the running plugins (disabled ones too)").add_argument(
        "id", metavar="ID", nargs="?"
    )
    call = verb(
        "call",
        "call one tool of a plugin (an id, or a folder: installed, approved and enabled on first use)",
        "Call TOOL of PLUGIN and print the result's text. PLUGIN is an installed plugin's id, or a plugin folder: "
        "one not installed yet is installed, every permission it declares granted, its launch (shown on stderr) "
        "approved and enabled.",
    )
    call.add_argument("plugin", metavar="PLUGIN", help="a plugin id, or a plugin folder")
    call.add_argument("tool", metavar="TOOL", help="the tool: remote name (echo) or host name (mcp-echo.echo)")
    call.add_argument("json_args", metavar="JSON_ARGS", nargs="?", default="{}", help="arguments as a JSON object")
    call.add_argument("--timeout", type=float, metavar="S", help="tool timeout in seconds (default: the manifest's)")
    logs = verb("logs", "a plugin's recent log lines (stderr and MCP log messages, redacted)")
    logs.add_argument("id", metavar="ID")
    logs.add_argument("--limit", type=int, default=200, metavar="N", help="at most N lines (1-1000, default 200)")
    verb("uninstall", "stop and forget a plugin").add_argument("id", metavar="ID")
    verb(
        "doctor",
        "what this machine offers (isolation layers, installers) and what is wrong in the state folder",
        "The output of hostd doctor --state-dir DIR: the isolation layers and installers of this machine, then what "
        "is wrong in the state folder (read only; no hostd started).",
    )


def _main_module() -> str | None:
    """The module ``python -m`` runs (``hostd.cli.hostctl``), or ``None`` for a console script."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", None)
    return name if isinstance(name, str) and name != "__main__" else None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hostctl`` console script, a process's: returns the exit code, which ends it.

    A reading command (:data:`READING`) runs without the cyclic garbage collector to its end, and what it built
    is then frozen (``gc.freeze``): the collection at exit would walk it for nothing (45 ms here), and a read
    leaves no file to flush. hostd/cli/_loading.py says the class. Any other command runs with the collector as
    it was.
    """
    collecting = gc.isenabled()
    gc.disable()  # until the command is known (_run): a read runs without it
    try:
        return _run(argv, collecting)
    finally:
        if collecting and not gc.isenabled():
            gc.freeze()
            gc.enable()


def _run(argv: Sequence[str] | None, collecting: bool) -> int:
    """:func:`main`'s work; turns the collector back on (``collecting``: it was on) for a command that is not a
    read, once the command line is parsed."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command == "call":
            try:
                args.arguments = json.loads(args.json_args)
            except ValueError as exc:
                parser.error(f"JSON_ARGS is not valid JSON: {exc}")
            if not isinstance(args.arguments, dict):
                parser.error("JSON_ARGS must be a JSON object")
            if args.timeout is not None and not (args.timeout > 0 and math.isfinite(args.timeout)):
                parser.error("--timeout must be a positive number of seconds")
        if args.command == "logs" and not 1 <= args.limit <= 1000:
            parser.error("--limit must be between 1 and 1000")
        if args.command == "import" and args.rewrite and args.undo:
            parser.error("--rewrite and --undo are two different steps: give one")
    except SystemExit as exc:
        return EXIT_USAGE if exc.code not in (0, None) else EXIT_OK
    if collecting and COMMANDS.get(args.command) not in READING:
        gc.enable()

    try:
        program = invoked_as(sys.argv[0], sys.executable, sys.orig_argv, _main_module())
        set_typed(program if args.state_dir is None else f"{program} --state-dir {shlex.quote(args.state_dir)}")
        if args.command == "demo":
            return trio.run(lambda: run_demo(real=not args.no_real))
        state_dir = args.state_dir if args.state_dir is not None else str(default_state_dir())
        if args.command == "doctor":  # read only, no hostd (one would repair the folder before it is looked at)
            print(f"hostctl: read {state_dir} directly (nothing started)", file=sys.stderr)
            from hostd.cli.hostd import doctor  # noqa: PLC0415 (doctor only: the probe, the installers)

            return doctor(state_dir)
        if args.command == "import":
            if args.undo:
                return undo_rewrite(args.config)
            try:
                read_config(args.config)  # before any hostd starts: a missing config fails at once
            except Failure as failure:
                print("\n".join(failure.lines()), file=sys.stderr)
                return EXIT_FAILED
            if args.rewrite and (refused := check_rewrite(args.config, args.yes)) is not None:
                return refused
            from hostd.cli.import_rewrite import gateway_command  # noqa: PLC0415 (import only: a config's parser)

            args.gateway = [*gateway_command(sys.argv[0], sys.executable, _main_module()), "mcp"]
            args.gateway += ["--state-dir", os.path.abspath(state_dir)]
        opts = Options(state_dir=state_dir, as_json=args.json, yes=getattr(args, "yes", False))
        return trio.run(run_command, COMMANDS[args.command], opts, args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `hostctl list | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED


_loading.loaded()


def run() -> NoReturn:
    """The ``hostctl`` console script and ``python -m hostd.cli.hostctl``: :func:`main`, then the process ends as
    Python's exit would, without its teardown (:func:`hostd.cli.hostd.end_process`)."""
    from hostd.cli.hostd import end_process  # noqa: PLC0415 (its parser is imported on demand)

    end_process(main())


if __name__ == "__main__":
    run()
