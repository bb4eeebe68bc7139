"""What hostctl prints for people: terminal-safe text, tables, the launch shown for approval, the ``next:`` hints.

Everything printed that a plugin or a manifest controls goes through :func:`terminal_safe` first (issue 10).
:data:`NEXT_COMMANDS` maps an error kind to the hostctl command that fixes it; :func:`as_typed` writes each
hint as the user typed hostctl (``--state-dir``). Nothing here talks to hostd.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from hostd.mcp.permissions import CLIENT_FEATURE_PERMISSIONS, RESERVED_PERMISSIONS
from hostd.wire import advice
from hostd.wire.text import escape_invisible


def terminal_safe(text: str, *, one_line: bool = False) -> str:
    """``text`` with every non-printable and default-ignorable code point escaped
    (:func:`hostd.wire.text.invisible`: controls, format characters such as bidi controls, the word joiner
    and tag characters, private-use and unassigned code points, variation selectors...; an allowlist of
    what renders, not a list of known hiding characters: issue 29).

    Each becomes ``\\uXXXX`` (a surrogate pair above U+FFFF: a valid JSON escape too, so ``--json``
    output stays JSON). ``\\n`` and ``\\t`` are kept unless ``one_line``: then a value cannot
    start a line of its own (a forged "approving the launch" line, say).
    """
    return escape_invisible(text, kept="" if one_line else "\n\t")


#: The hostctl command that fixes an error kind, filled from the error's ``data`` (``{plugin}``, ``{tool}``)
#: and the plugin's ``{folder}``. The class: hostd's messages name the protocol method that fixes them
#: ("enable it with tools/setEnabled", "prepare it first (plugins/prepare)", "plugins/approve"), which a
#: hostctl user cannot run; every kind whose fix hostctl has a verb for is in this one table, and a failure
#: of that kind ends with ``next: <command>`` (:func:`next_command`). ``PLUGIN_START_FAILED`` is here only
#: when the launch cannot be resolved (``data.launchError``: the manifest is fixed, then installed again)
#: or the restart policy gave up ("use plugins/restart").
NEXT_COMMANDS: dict[str, str] = {
    "GAVE_UP": "hostctl restart {plugin}",
    "TOOL_DISABLED": "hostctl enable {tool}",
    "PERMISSION_NOT_GRANTED": "hostctl grant {plugin} --all, then hostctl enable {plugin}",
    "MCP_TRUST_APPROVAL_REQUIRED": "hostctl approve {plugin}, then hostctl enable {plugin}",
    "MANIFEST_CHANGED": "hostctl approve {plugin}, then hostctl enable {plugin}",
    "TOOL_DEFINITION_CHANGED": "hostctl approve {plugin}",
    "PLUGIN_NOT_PREPARED": "hostctl enable {plugin} (it installs the packages), then hostctl approve {plugin}",
    "LAUNCH_UNRESOLVED": "fix the command in the manifest in {folder}, then hostctl install {folder}",
}


def cli_words(text: str, data: Mapping[str, Any] | None = None) -> str:
    """``text`` (a message of hostd's) with each phrase of :data:`hostd.wire.advice.METHOD_PHRASES` as the
    hostctl command that does it (:func:`as_typed`), filled from ``data`` (an error's data: ``plugin``, ``tool``):
    :func:`hostd.wire.advice.cli_words` with the program as this hostctl was invoked."""
    return advice.cli_words(text, data, as_typed)


def next_command(kind: str, data: Mapping[str, Any], folder: str | None = None) -> str | None:
    """The hostctl command (from :data:`NEXT_COMMANDS`) that fixes an error of ``kind`` with ``data``,
    or ``None`` when hostctl has no verb for it or the data does not name what it needs."""
    if kind == "PLUGIN_START_FAILED" and data.get("launchError"):
        kind = "LAUNCH_UNRESOLVED"
    elif kind == "PLUGIN_START_FAILED" and "plugins/restart" in f"{data.get('message', '')} {data.get('reason', '')}":
        kind = "GAVE_UP"
    template = NEXT_COMMANDS.get(kind)
    if template is None:
        return None
    values = {"plugin": data.get("plugin"), "tool": data.get("tool"), "folder": folder}
    if any(values[name] is None for name in ("plugin", "tool", "folder") if "{" + name + "}" in template):
        return None
    return template.format(**{k: shlex.quote(str(v)) for k, v in values.items() if v is not None})


def error_details(data: Mapping[str, Any], message: str = "") -> list[str]:
    """Extra lines for an error's ``data``: manifest field errors (those not
    already in ``message``), the upstream error, then the stderr tail."""
    lines: list[str] = []
    for item in data.get("errors") or []:
        if isinstance(item, Mapping):
            text = f"{item['field']}: {item.get('message', '')}" if item.get("field") else str(item.get("message", ""))
            if text and text not in message:
                lines.append(text)
    hint = data.get("hint")  # hostd's own reading of the failure (a sandbox refusal, a version manager's shim)
    if isinstance(hint, str) and hint not in message:
        lines.append(f"hint: {terminal_safe(hint, one_line=True)}")
    upstream = data.get("upstream")
    if isinstance(upstream, Mapping):
        lines.append(f"upstream error {upstream.get('code')}: {upstream.get('message')}")
    # Each line once: a stderr line the progress display already showed live is not repeated here.
    tail = [line for line in data.get("stderrTail") or [] if str(line) not in SHOWN_LIVE]
    if tail:
        lines.append("stderr tail:")
        lines.extend(f"  {line}" for line in tail)
    return lines


#: The plugin log lines this hostctl process has already printed live (:func:`with_progress`).
#: The class: one plugin line reaching the user twice (live while starting, then again in an
#: error's ``stderr tail:``); every printer of plugin lines checks here first.
SHOWN_LIVE: set[str] = set()


def describe_launch(info: Mapping[str, Any]) -> list[str]:
    """Human lines for ``PluginInfo.launch``: the command line, where and how it runs."""
    return [terminal_safe(line, one_line=True) for line in _launch_lines(info)]


def _launch_lines(info: Mapping[str, Any]) -> list[str]:
    launch = info.get("launch")
    if not isinstance(launch, Mapping):
        return ["launch: unknown"]
    if "digest" not in launch:
        return [f"launch: cannot be resolved: {launch.get('error', '?')}"]
    command = shlex.join([str(launch.get("command", "?")), *map(str, launch.get("args") or [])])
    lines = [f"launch: {command}"]
    executable = launch.get("executable")
    if executable and executable != launch.get("command"):
        lines[0] += f"   ({launch.get('command')} = {executable})"
    isolation = ", ".join(launch.get("isolation") or []) or "none"
    lines.append(f"in {launch.get('cwd')}")
    lines.append(f"isolation {isolation}; environment {', '.join(launch.get('envKeys') or []) or 'empty'}")
    lines += _preparation_lines(launch.get("prepare"))
    return lines


def _preparation_lines(prepare: object) -> list[str]:
    """What preparation installs (``launch.prepare``): every package, its exact version, the registry,
    which versions were resolved because the config pinned none, and whether a build may run."""
    if not isinstance(prepare, Mapping):
        return []
    manager = prepare.get("manager", "?")
    unpinned = [str(name) for name in prepare.get("unpinned") or []]
    if prepare.get("state") != "prepared":
        lines = [f"installs ({manager}, not yet prepared): {' '.join(map(str, prepare.get('packages') or []))}"]
    else:
        resolved = prepare.get("resolved") or {}
        exact = " ".join(
            f"{name}@{version}" if manager != "uv" else f"{name}=={version}" for name, version in resolved.items()
        )
        lines = [f"installed ({manager}, from {prepare.get('registry') or 'its default registry'}): {exact}"]
        lines.append(f"source builds: {'allowed' if prepare.get('build') else 'refused (wheels only)'}")
    lines += [unpinned_line(name, prepare) for name in unpinned]
    return lines


def unpinned_line(name: str, prepare: Mapping[str, Any]) -> str:
    """What the approval says of a package the config named without a version (``launch.prepare``)."""
    resolved = (prepare.get("resolved") or {}) if prepare.get("state") == "prepared" else {}
    version = resolved.get(name)
    if version is None:  # a uv request's name as the lock writes it (``Mcp_Server`` -> ``mcp-server``)
        version = resolved.get(re.sub(r"[-_.]+", "-", name).lower())
    if version is None:
        return f"{name}: the config did not pin a version; preparing it takes the registry's current one"
    return f"{name}: resolved to {version} (the config did not pin a version)"


def plugin_version(info: Mapping[str, Any]) -> str:
    """The version shown for a ``PluginInfo``: its package's (``info.package``: what runs, for an imported
    plugin whose manifest version is a placeholder); for an imported plugin whose launch runs no registry
    package (``info.imported``: a script such as ``python3 server.py``, whose manifest ``0.0.0`` is the import's
    placeholder), the version its server reported at its last start (``info.serverInfo``), marked
    ``(serverInfo)``, else ``unknown`` (:data:`VERSION_NOTE` says why); else the manifest's."""
    package = info.get("package")
    if isinstance(package, Mapping):
        return str(package.get("version") or "unresolved")
    if info.get("imported"):
        reported = info.get("serverInfo")
        if isinstance(reported, Mapping) and reported.get("version"):
            return f"{reported['version']} (serverInfo)"
        return "unknown"
    return str(info.get("version") or "-")


#: Said once under a table with a VERSION ``unknown`` (:func:`plugin_version`). The class: a figure hostd does not
#: know shown as one it knows (an imported script entry listed as ``VERSION 0.0.0``, the import's placeholder).
VERSION_UNKNOWN = (
    "an imported config entry that runs no registry package (a script, a program of its own, a remote server) "
    "names no version; its server reports its own when it starts (then shown, as serverInfo)"
)
VERSION_NOTE = f"VERSION unknown: {VERSION_UNKNOWN}"


def package_name(info: Mapping[str, Any]) -> str:
    """A ``PluginInfo``'s package name for a table column next to :func:`plugin_version`: ``name``, or
    ``name (not pinned)`` when the config named no version; ``-`` when its launch names no package."""
    package = info.get("package")
    if not isinstance(package, Mapping):
        return "-"
    return str(package.get("name")) + ("" if package.get("pinned") else " (not pinned)")


def package_text(info: Mapping[str, Any]) -> str:
    """A ``PluginInfo``'s package (``info.package``): ``name@version`` (``name==version`` for uv) when the
    launch pins it, ``name, resolved to X (the config did not pin a version)`` when preparation took the
    registry's current version, ``name, not pinned (resolved when prepared)`` before; ``-`` when its
    launch names no package."""
    package = info.get("package")
    if not isinstance(package, Mapping):
        return "-"
    name, version = package.get("name"), package.get("version")
    if package.get("pinned"):
        return f"{name}{'==' if package.get('manager') == 'uv' else '@'}{version}"
    if version:
        return f"{name}, resolved to {version} (the config did not pin a version)"
    return f"{name}, not pinned (resolved when prepared)"


def content_text(result: Mapping[str, Any]) -> str:
    """A tool result's content as text: text items verbatim, others as a short tag."""
    parts: list[str] = []
    for item in result.get("content") or []:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "text":
            parts.append(str(item.get("text", "")))
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {item.get('mimeType', '?')}, {len(str(item.get('data', '')))} base64 chars]")
        elif kind == "resource":
            resource = item.get("resource") or {}
            parts.append(f"[resource {resource.get('uri', '?')}]")
        elif kind == "resource_link":
            parts.append(f"[link {item.get('uri', '?')}]")
        else:
            parts.append(f"[{kind}]")
    if not parts and "structuredContent" in result:
        return json.dumps(result["structuredContent"], ensure_ascii=False)
    return "\n".join(parts)


def format_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces; trailing blanks trimmed; cells made
    terminal-safe (:func:`terminal_safe`, one line each). Used by the demo's transcript."""
    table = [list(header), *([terminal_safe(cell, one_line=True) for cell in row] for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table)


# -- output for people --------------------------------------------------------------


def make_console(*, stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr) that never interprets markup in what it prints.

    Not a terminal: no colours, no animation, and a wide line so that tables are not
    folded into a pipe or a log file.
    """
    stream = sys.stderr if stderr else sys.stdout
    terminal = stream.isatty()
    return Console(
        file=stream,
        width=None if terminal else 200,
        markup=False,
        highlight=False,
        emoji=False,
        soft_wrap=False,
    )


def _safe(value: Any) -> Text:
    """A table cell: ``value`` as text, every control or hiding character escaped (one line)."""
    return Text(terminal_safe("" if value is None else str(value), one_line=True))


def print_table(console: Console, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A readable table: ``header`` (none when every name is empty) then one row per item,
    every cell terminal-safe. Not on a terminal: plain text without trailing blanks."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold", show_header=any(header))
    for name in header:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*(_safe(cell) for cell in row))
    if console.is_terminal:
        console.print(table)
        return
    with console.capture() as captured:
        console.print(table)
    console.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
    console.file.flush()


def say(console: Console, text: str, *, style: str | None = None) -> None:
    """One line for people (terminal-safe; ``\\n`` keeps separate lines)."""
    console.print(Text(terminal_safe(text), style=style or ""))


def print_json(value: Any) -> None:
    """``--json``: the protocol's JSON, indented; control characters escaped (still valid JSON)."""
    print(terminal_safe(json.dumps(value, indent=2, ensure_ascii=False)))


#: How the user reached this state folder: the program as they invoked it (:func:`invoked_as`), then
#: ``--state-dir DIR`` when they named one (set once by :func:`hostd.cli.hostctl.main`, :func:`set_typed`).
#: Every printed ``next:`` command goes through :func:`as_typed`. The class: a hint that cannot run as
#: printed -- ``hostctl`` not on PATH (the README installs it in ``.venv/bin``), run as a module, or the
#: default state folder instead of the one named (PLUGIN_NOT_FOUND).
_TYPED = "hostctl"


def invoked_as(argv0: str, executable: str, orig_argv: Sequence[str], main_module: str | None) -> str:
    """hostctl as the user invoked it, shell-quoted, to start a hint a shell runs word for word.

    ``main_module``: the module run by ``python -m`` (``__main__.__spec__.name``), else ``None`` (a console
    script). A module: ``<python> -m <module>``, where ``<python>`` is the interpreter as typed
    (``orig_argv[0]``) when the shell finds the same one by that name, else ``executable``. A script:
    ``argv0`` as typed (``.venv/bin/hostctl``); a script the shell found on PATH (``argv0`` absolute, its
    base name resolving to it) by its base name.
    """
    if main_module:
        typed = orig_argv[0] if orig_argv else ""
        python = typed if typed and _finds(typed, executable) else executable
        return shlex.join([python, "-m", main_module])
    name = os.path.basename(argv0)
    if os.path.isabs(argv0) and _finds(name, argv0):
        return shlex.quote(name)
    return shlex.quote(argv0)


def _finds(typed: str, path: str) -> bool:
    """Whether a shell running ``typed`` here runs the file at ``path`` (the same path: a venv's
    ``python`` is a symlink to the system one, and only its own path runs it in the venv)."""
    found = shutil.which(typed)
    return found is not None and os.path.abspath(found) == os.path.abspath(path)


def set_typed(prefix: str) -> None:
    """Name this run's hostctl as the user typed it (``.venv/bin/hostctl --state-dir DIR``); once, before any
    output."""
    global _TYPED  # noqa: PLW0603 - one value per process, set before any output
    _TYPED = prefix


def as_typed(command: str) -> str:
    """``command`` (one or more ``hostctl VERB ...`` joined by prose) with each ``hostctl`` as the user typed
    it (:func:`set_typed`): ``.venv/bin/hostctl --state-dir DIR VERB ...``."""
    return advice.with_program(command, _TYPED)


def next_step(console: Console, text: str, command: str) -> None:
    """``next: <what>: <command>`` on its own line, for the user to run (``command`` :func:`as_typed`)."""
    # One line, never folded at the console's width: a hint is copied and run as printed.
    console.print(
        Text.assemble(("next: ", "bold"), terminal_safe(text, one_line=True) + ": ", (as_typed(command), "bold")),
        soft_wrap=True,
    )


def launch_details(info: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The whole launch, as (label, value) rows for the approval prompt."""
    launch = info.get("launch")
    if not isinstance(launch, Mapping):
        return [("launch", "unknown")]
    shim = launch.get("shim")
    if "digest" not in launch:
        unresolved = [("launch", f"cannot be resolved ({launch.get('kind')}): {launch.get('error')}")]
        if isinstance(shim, Mapping):  # nvm installed, its default not followed: why, and the fix
            unresolved.append(("shim", str(shim.get("message"))))
        return unresolved
    rows = [
        ("command", shlex.join([str(launch.get("command")), *map(str, launch.get("args") or [])])),
        ("executable", str(launch.get("executable"))),
    ]
    if isinstance(shim, Mapping):  # the command found is a version manager's stand-in
        rows.append(("shim", str(shim.get("message"))))
    if info.get("package"):  # what the executable runs: the package and the version that runs, and why
        rows.append(("package", package_text(info)))
        rows += [("prepared", line) for line in _preparation_lines(launch.get("prepare"))]
    for index, arg in enumerate(launch.get("args") or []):
        rows.append((f"argument {index + 1}", str(arg)))
    chain = launch.get("runtime") or []
    if chain:
        rows.append(("runs", " -> ".join(map(str, chain))))
    rows.append(("in folder", str(launch.get("cwd"))))
    for path, digest in (launch.get("files") or {}).items():
        rows.append(("file", f"{path}  {digest}"))
    capabilities = launch.get("capabilities")
    if isinstance(capabilities, Mapping):
        rows += capability_rows(capabilities)
    else:
        for arg, target in (launch.get("folders") or {}).items():
            rows.append(("folder", f"{arg} -> {target}"))
    for key, value in (launch.get("env") or {}).items():
        rows.append(("env", f"{key}={value}" if value is not None else f"{key}=(secret, not shown)"))
    secret_args = launch.get("secretArguments") or []
    if secret_args:
        # Issue 25: a secret on a command line is readable by every process of the machine.
        names = ", ".join(map(str, secret_args))
        rows.append(("secrets in arguments", f"{names} (every process of the machine can read a command line)"))
    rows.append(("environment", ", ".join(launch.get("envKeys") or []) or "empty"))
    rows.append(("isolation", ", ".join(launch.get("isolation") or []) or "none"))
    rows.append(("permissions", ", ".join(info.get("permissions") or []) or "none"))
    recorded = ", ".join(info.get("pinnedTools") or [])
    rows.append(
        (
            "tools",
            ", ".join(info.get("tools") or [])
            or (recorded and f"{recorded} (recorded at its first start)")
            or "recorded at the first start",
        )
    )
    rows.append(("digest", str(launch.get("digest"))))
    return rows


def capability_rows(capabilities: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``launch.capabilities`` (hostd/host/capability_set.py) as (label, value) rows: one list of what the
    plugin may reach -- files and folders with access and why, network, secrets by channel, packages."""
    rows: list[tuple[str, str]] = []
    for item in capabilities.get("folders") or []:
        access = "read-write" if item.get("access") == "write" else "read"
        rows.append(("reaches", f"{item.get('path')}  {access}, {item.get('why')}: {item.get('source')}"))
    network = capabilities.get("network") or {}
    ports = ", ".join(map(str, network.get("tcpPorts") or []))
    access = str(network.get("access"))
    if access == "hosts" and network.get("filtering", "enforced") != "enforced":  # a remote: hostd's requests
        rows.append(("network", f"only to {', '.join(network.get('hosts') or [])} ({network['filtering']})"))
    elif access == "hosts":  # issue 26: the allowlist, enforced by hostd's proxy
        rows.append(
            (
                "network",
                "only through hostd's proxy, to "
                + (", ".join(network.get("hosts") or []) or "no host yet")
                + "; any other host is asked of you, or refused",
            )
        )
    else:
        rows.append(("network", {"all": "all", "none": "none"}.get(access, f"TCP ports {ports}")))
        if network.get("filtering"):
            rows.append(
                ("network hosts", f"{', '.join(network.get('hosts') or []) or 'none'} ({network['filtering']})")
            )
    for secret in capabilities.get("secrets") or []:
        note = "" if secret.get("set") else " (not set)"
        warning = " -- readable by every process of the machine" if secret.get("channel") == "argv" else ""
        rows.append(("secret", f"{secret.get('name')} via {secret.get('channel')}{note}{warning}"))
    for package in capabilities.get("packages") or []:
        version = f" {package['version']}" if package.get("version") else " (to prepare)"
        registry = f" from {package['registry']}" if package.get("registry") else ""
        rows.append(("package", f"{package.get('manager')} {package.get('name')}{version}{registry}"))
    return rows


def print_info(console: Console, info: Mapping[str, Any], more: Sequence[tuple[str, str]] = ()) -> None:
    """A ``PluginInfo`` for people: id, version, folder, status, grants, approval and the whole launch, then the
    rows ``more`` (``hostctl show``: :func:`show_rows`)."""
    say(console, f"{info['id']} {plugin_version(info)} ({info['name']})", style="bold")
    rows = [("folder", info["path"]), ("status", f"{info['status']}{', enabled' if info.get('enabled') else ''}")]
    rows.append(("granted", ", ".join(info.get("granted") or []) or "nothing"))
    launch = info.get("launch") or {}
    if isinstance(launch, Mapping) and "digest" in launch:
        rows.append(("approved", "yes" if launch.get("approved") else "no"))
    print_table(console, ["", ""], [*rows, *launch_details(info), *more])


def _version_text(version: str) -> str:
    """:func:`plugin_version`'s value with where it comes from, when that is not the manifest or the package."""
    if version == "unknown":
        return f"unknown: {VERSION_UNKNOWN}"
    if version.endswith(" (serverInfo)"):
        reported = version.removesuffix(" (serverInfo)")
        return f"{reported}, as its server reported it at its last start (serverInfo); the config named no version"
    return version


def show_rows(
    info: Mapping[str, Any], status: Mapping[str, Any], tools: Sequence[Mapping[str, Any]], state_dir: str
) -> list[tuple[str, str]]:
    """What ``hostctl show`` adds to :func:`print_info`'s rows for one plugin: what ``list`` shows that those do not
    (version and package, FEATURES), the network hosts granted, its tools (``tools``:
    ``tools/list`` with ``includeDisabled``, empty while it does not run: then the manifest's, with the user's
    ``info.disabledTools``), the server that answered, the last start's error, and the state folder.

    ``status``: its ``PluginStatus``; ``state_dir``: the state folder read."""
    version = plugin_version(info)
    rows = [
        ("version", _version_text(version)),
        *([] if any(label == "package" for label, _ in launch_details(info)) else [("package", package_text(info))]),
        ("features", permission_figures(info)[1]),
        ("network hosts", _granted_hosts(info)),
    ]
    disabled = set(info.get("disabledTools") or [])
    if tools:
        names = [str(t["name"]) for t in tools]
        where = "listed by the running server"
    elif info.get("tools") or not info.get("pinnedTools"):
        names = [str(name) for name in info.get("tools") or []]
        where = "declared in its manifest (a running server lists its own)"
    else:
        names = [str(name) for name in info.get("pinnedTools") or []]
        where = "recorded at its first start (a running server lists its own)"
    off = [name for name in names if name in disabled]
    rows.append(("tool count", f"{len(names)} {where}; {len(off)} disabled{': ' + ', '.join(off) if off else ''}"))
    server = status_row(status)[4]
    if server != "-":
        rows.append(("server", server))
    reason = status_row(status)[-1]
    rows.append(("last start error", reason or "none"))
    rows.append(("state folder", state_dir))
    return rows


def _granted_hosts(info: Mapping[str, Any]) -> str:
    """``show``'s "network hosts": the hosts granted; for a launch whose network is not limited to an allowlist
    ("network all" above it), that no host needs granting (a new user's walk read "network all" beside "none
    granted" as a contradiction)."""
    hosts = ", ".join(info.get("networkHosts") or [])
    launch = info.get("launch") or {}
    capabilities = launch.get("capabilities") if isinstance(launch, Mapping) else None
    access = ((capabilities or {}).get("network") or {}).get("access")
    if access == "all" and not hosts:
        return "none needed (its network is not limited to an allowlist)"
    return hosts or "none granted"


def next_action(info: Mapping[str, Any]) -> tuple[str, str]:
    """``(what, command)``: the step that brings the plugin ``info`` (a ``PluginInfo``) closer to
    running, and the hostctl command for it. A launch that cannot be resolved comes first."""
    plugin_id = info["id"]
    launch = info.get("launch") or {}
    # The reserved permissions (mcp.sampling...) are optional: granting one lets the plugin ask the person or
    # the model something, a choice of its own, never a step to start it.
    missing = sorted(set(info.get("permissions") or []) - set(info.get("granted") or []) - RESERVED_PERMISSIONS)
    if isinstance(launch, Mapping) and "error" in launch:
        # First: nothing granted or approved can start a launch that cannot be resolved.
        fix = next_command("LAUNCH_UNRESOLVED", {"plugin": plugin_id}, str(info["path"])) or ""
        what, _, command = fix.partition(", then ")
        return f"its launch cannot run ({launch.get('kind', '?')}): {what}", command
    if isinstance(launch, Mapping) and "digest" in launch and not launch.get("approved"):
        return "review and approve its launch", f"hostctl approve {plugin_id}"
    if missing:
        return f"grant {', '.join(missing)}", f"hostctl grant {plugin_id} --all"
    if not info.get("enabled"):
        return "start it", f"hostctl enable {plugin_id}"
    if info.get("status") == "error":  # enabled but its start failed: it has no tools to see; logs says why
        return "see why its start failed", f"hostctl logs {plugin_id}"
    return "see its tools", f"hostctl tools {plugin_id}"


def print_next_for(console: Console, info: Mapping[str, Any]) -> None:
    """Print :func:`next_action` for ``info`` as a ``next:`` line."""
    next_step(console, *next_action(info))


def status_row(status: Mapping[str, Any], enabled: bool | None = None, disabled: int = 0) -> list[str]:
    """One STATUS_HEADER row; TOOLS is ``enabled/total``: ``disabled`` of its ``tools_count`` are tools
    the user disabled (:func:`disabled_tools`)."""
    server = " ".join(str(status[k]) for k in ("server_name", "server_version") if status.get(k))
    error = status.get("error")
    reason = (error.get("reason") or error.get("message")) if isinstance(error, Mapping) else error
    reason = cli_words(str(reason), error if isinstance(error, Mapping) else None) if reason else reason
    return [
        str(status["plugin_id"]),
        str(status.get("status", "?")),
        "-" if enabled is None else ("yes" if enabled else "no"),
        # Only a ready plugin serves tools: "-" otherwise (a stopped plugin's "0/0" read as "it has none", while
        # show counted the tools its manifest declares: a new user's README walk).
        f"{max(int(status.get('tools_count') or 0) - disabled, 0)}/{int(status.get('tools_count') or 0)}"
        if status.get("status") == "ready"
        else "-",
        server or "-",
        str(status.get("protocol_version") or "-"),
        str(reason or ""),
    ]


STATUS_HEADER = ["PLUGIN", "STATUS", "ENABLED", "TOOLS", "SERVER", "PROTOCOL", "ERROR"]


def shorten(value: Any, limit: int = 100) -> str:
    """``value`` (a string, else its JSON) on one line, whitespace runs folded, at most ``limit`` characters
    (a longer one cut, ending with "…")."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- figures explained ----------------------------------------------------------------------------------------

#: What each reserved permission lets a plugin ask of its parent (MCP client features).
FEATURE_MEANINGS = {"sampling": "the model", "elicitation": "the person", "roots": "folders"}

#: Said once under a table with a FEATURES column. The class: a figure whose parts mean different things
#: (``GRANTED 0/3`` counted the reserved ``mcp.*`` permissions as permissions left to grant).
FEATURES_NOTE = (
    "FEATURES: MCP client features a plugin may ask of its parent (the mcp.* permissions: sampling asks the "
    "model, elicitation the person, roots the folders); optional, none is needed to start it, and GRANTED does "
    "not count them. hostctl, the parent here, serves none of them: an app that embeds hostd and serves one "
    "grants it there."
)


def permission_figures(info: Mapping[str, Any]) -> tuple[str, str]:
    """``(GRANTED, FEATURES)`` cells of a ``PluginInfo``: granted/declared of its ordinary permissions, and the
    MCP client features (reserved ``mcp.*`` permissions) it declares, each marked ``granted`` when it is."""
    declared = set(info.get("permissions") or [])
    granted = set(info.get("granted") or []) & declared
    ordinary = declared - RESERVED_PERMISSIONS
    features = [
        f"{feature}{' (granted)' if permission in granted else ''}"
        for feature, permission in CLIENT_FEATURE_PERMISSIONS.items()
        if permission in declared
    ]
    return f"{len(granted & ordinary)}/{len(ordinary)}", ", ".join(features) or "-"


def tool_count_note(info: Mapping[str, Any], status: Mapping[str, Any]) -> str | None:
    """Why the tools a ``ready`` plugin serves (``PluginStatus.tools_count``, ``withheld``) differ in number from
    those its manifest declares (``PluginInfo.tools``, shown at install and approval), or ``None`` when they do
    not differ or it is not ready."""
    if status.get("status") != "ready":
        return None
    declared = len(info.get("tools") or [])
    listed = int(status.get("tools_count") or 0)
    withheld = len(status.get("withheld") or [])
    if declared == listed and not withheld:
        return None
    parts = [f"{declared} declared in the manifest, {listed + withheld} listed by the server"]
    if withheld:
        parts.append(f"{withheld} withheld: changed since approval (hostctl approve {info.get('id')})")
    if declared == 0:
        parts.append("the manifest names none (an imported server's tools are recorded at its first start)")
    elif listed + withheld < declared:
        parts.append(
            "the others need an MCP client feature the parent does not offer (contributes.tools[].needs), "
            "so the server does not list them"
        )
    return as_typed(f"tools: {'; '.join(parts)}")
