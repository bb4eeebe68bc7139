"""``hostd`` command line: ``hostd serve`` runs the daemon on stdin/stdout.

Start-up is kept light on purpose: only argparse, logging, trio and the
control channel are imported before ``initialize`` is answered; the host
(pydantic models, the mcp SDK, jsonschema) is imported in a worker thread
afterwards (``docs/protocol.md`` "Process contract").
"""

from __future__ import annotations

import argparse
import atexit
import functools
import importlib
import logging
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import trio

from hostd import __version__
from hostd.control.core import EXIT_SOFTWARE, EXIT_USAGE, InitializeOptions, Notify
from hostd.control.outbox import OUTBOX_BYTES, current_outbox
from hostd.storage.state import StateError, StateStore
from hostd.wire.framing import PARENT_FRAME_LIMIT, PLUGIN_FRAME_LIMIT, RESULT_LIMIT
from sandbox.limits import raise_nofile_limit

#: ``--max-disk-mb``'s default: ``sandbox.watchdog.DEFAULT_MAX_DISK_BYTES`` in MiB (not imported:
#: the CLI stays light until ``initialize`` is answered).
DEFAULT_MAX_DISK_MB = 1024

if TYPE_CHECKING:
    from collections.abc import Iterable
    from types import ModuleType

    from hostd.control.server import HostApi, HostFactory
    from hostd.host.records import HostSettings
    from sandbox.probe import Capability


def _outbox_bytes(text: str) -> int:
    value = int(text)
    if value < 1024:
        raise argparse.ArgumentTypeError("must be at least 1024")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hostd", description="MCP plugin host daemon (JSON-RPC 2.0 on stdio).")
    parser.add_argument("--version", action="version", version=f"hostd {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    doctor = commands.add_parser(
        "doctor", help="print the isolation layers this machine offers (and what is wrong in a state folder)"
    )
    doctor.add_argument(
        "--state-dir",
        help="also check this state folder: broken plugins, damaged or unreadable files, files kept aside",
    )
    serve = commands.add_parser("serve", help="serve the control protocol on stdin/stdout")
    _add_channel_arguments(serve)
    _add_isolation_arguments(serve)
    _add_plugin_arguments(serve)
    mcp = commands.add_parser(
        "mcp",
        help="serve the tools of a state folder's enabled plugins as an MCP server on stdin/stdout",
        description="Serve MCP on stdin/stdout (an MCP client's config: command hostd, args mcp --state-dir DIR): "
        "the tools of the enabled plugins of the state folder, each sandboxed and gated as through hostd serve. "
        "Install, grant and approve plugins with hostctl; this command approves nothing.",
    )
    _add_mcp_arguments(mcp)
    _add_isolation_arguments(mcp)
    _add_plugin_arguments(mcp)
    return parser


def _add_mcp_arguments(mcp: argparse.ArgumentParser) -> None:
    """``hostd mcp``'s state folder, log level and message bounds (its trust mode is always strict)."""
    mcp.add_argument("--state-dir", help="state folder (default: the platform's user state dir for hostd)")
    mcp.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"], help="stderr log level"
    )
    mcp.add_argument(
        "--no-control-socket",
        action="store_true",
        help="do not listen on <state dir>/control.sock (mode 0600), through which hostctl reaches this hostd",
    )
    mcp.add_argument(
        "--http",
        type=int,
        metavar="PORT",
        help="serve Streamable HTTP on 127.0.0.1:PORT (0: a free port) instead of stdio; the URL and the bearer "
        "token every request must carry are written to <state dir>/mcp-http.json (mode 0600)",
    )
    mcp.add_argument(
        "--tool-search",
        action="store_true",
        help="list two tools only, search_tools (ranked by BM25 over every tool's name, description and schema "
        "property names) and call_tool, instead of every tool: a few hundred tokens of the model's context",
    )
    mcp.add_argument(
        "--max-message-bytes",
        type=int,
        default=PARENT_FRAME_LIMIT,
        help=f"bound of one message from the MCP client, in bytes (default {PARENT_FRAME_LIMIT})",
    )
    mcp.add_argument(
        "--max-result-bytes",
        type=int,
        default=RESULT_LIMIT,
        help=f"bound of one tool result sent to the client, in bytes (default {RESULT_LIMIT})",
    )
    mcp.add_argument(
        "--max-plugin-message-bytes",
        type=int,
        default=PLUGIN_FRAME_LIMIT,
        help=f"bound of one message from a plugin, in bytes (default {PLUGIN_FRAME_LIMIT})",
    )


def _add_channel_arguments(serve: argparse.ArgumentParser) -> None:
    """``hostd serve``'s state folder, log level, trust mode and the bounds of the messages it carries."""
    serve.add_argument("--state-dir", help="state folder (default: the platform's user state dir for hostd)")
    serve.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"], help="stderr log level"
    )
    serve.add_argument(
        "--no-restore",
        action="store_true",
        help="do not start the enabled plugins now; each starts at its plugins/enable, and one whose last start "
        "failed is shown in error with that reason (hostctl's own hostd runs so)",
    )
    serve.add_argument(
        "--no-control-socket",
        action="store_true",
        help="do not listen on <state dir>/control.sock (mode 0600), through which hostctl reaches this hostd",
    )
    serve.add_argument(
        "--trust",
        default="strict",
        choices=["strict", "development"],
        help="strict: enable requires plugins/approve of the exact launch; development: only log",
    )
    serve.add_argument(
        "--max-message-bytes",
        type=int,
        default=PARENT_FRAME_LIMIT,
        help=f"bound of one message from the parent, in bytes (default {PARENT_FRAME_LIMIT})",
    )
    serve.add_argument(
        "--max-outbox-bytes",
        type=_outbox_bytes,
        default=OUTBOX_BYTES,
        help=f"bound of what waits to be written to the parent, in bytes (default {OUTBOX_BYTES}); "
        "see docs/protocol.md 'Flow control'",
    )
    serve.add_argument(
        "--max-result-bytes",
        type=int,
        default=RESULT_LIMIT,
        help=f"bound of one tool result sent to the parent, in bytes (default {RESULT_LIMIT})",
    )
    serve.add_argument(
        "--max-plugin-message-bytes",
        type=int,
        default=PLUGIN_FRAME_LIMIT,
        help=f"bound of one message from a plugin, in bytes (default {PLUGIN_FRAME_LIMIT}; a manifest's "
        "backend.max_message_bytes overrides it); an answer over it fails only its call",
    )


def _add_isolation_arguments(serve: argparse.ArgumentParser) -> None:
    """``hostd serve``'s isolation of plugins: the sandbox level, the folders Landlock opens, the resource bounds."""
    serve.add_argument(
        "--sandbox",
        default="standard",
        choices=["basic", "standard", "strict"],
        help="isolation of plugins: basic (shim, rlimits), standard (+ Landlock, seccomp where available; "
        "network allowed), strict (+ no network, no shared package caches)",
    )
    serve.add_argument(
        "--allow-write",
        action="append",
        default=[],
        metavar="PATH",
        help="a further folder plugins may write under Landlock (repeatable)",
    )
    serve.add_argument(
        "--no-login-path",
        action="store_true",
        help="do not add the login shell's PATH (nvm, volta, Homebrew...) to the PATH searched for commands",
    )
    serve.add_argument(
        "--allow-read",
        action="append",
        default=[],
        metavar="PATH",
        help="a further folder plugins may read and execute from under Landlock, e.g. a runtime "
        "outside the usual places (repeatable)",
    )
    serve.add_argument("--max-rss-mb", type=float, help="end a plugin whose process tree uses more resident memory")
    serve.add_argument(
        "--max-cpu-percent",
        type=float,
        help="end a plugin whose tree uses more CPU (percent of one core, 30 s average)",
    )
    serve.add_argument(
        "--max-disk-mb",
        type=float,
        default=float(DEFAULT_MAX_DISK_MB),
        help="end a plugin whose data folder and TMPDIR together hold more, in MiB allocated "
        f"(default {DEFAULT_MAX_DISK_MB}; 0: no bound)",
    )


def _add_plugin_arguments(serve: argparse.ArgumentParser) -> None:
    """``hostd serve``'s restart policy and pings, the package registries, bundle trust roots, private
    downloads and proxy variables."""
    serve.add_argument(
        "--restart",
        default="on-failure",
        choices=["on-failure", "never"],
        help="restart policy after a plugin crash (default: on-failure, with backoff)",
    )
    serve.add_argument("--ping-interval", type=float, default=30.0, help="seconds between liveness pings")
    serve.add_argument("--ping-timeout", type=float, default=10.0, help="seconds a plugin has to answer a ping")
    serve.add_argument(
        "--npm-registry",
        metavar="URL",
        help="npm registry (a mirror) for every plugins/prepare (default: npm_config_registry of hostd's "
        "environment, else npm's own)",
    )
    serve.add_argument(
        "--python-index",
        metavar="URL",
        help="Python package index (a mirror) for every plugins/prepare (default: UV_INDEX_URL of hostd's "
        "environment, else PyPI)",
    )
    serve.add_argument(
        "--bundle-trust-root",
        action="append",
        default=[],
        metavar="PEM_FILE",
        help="certificates (PEM) a signed .mcpb bundle's signer must chain to; its signature is then 'verified' "
        "or the bundle refused (repeatable; default: HOSTD_BUNDLE_TRUST_ROOT, files separated by "
        f"'{os.pathsep}'; none: signatures are checked against the archive only, 'unverified')",
    )
    serve.add_argument(
        "--allow-private-download",
        action="append",
        default=[],
        metavar="HOST",
        help="a host a registry entry's bundle URL may name though it resolves to a loopback or private address "
        "(your own mirror; repeatable; default: none, such downloads are refused)",
    )
    serve.add_argument(
        "--resolve",
        action="append",
        default=[],
        type=resolve_pin,
        metavar="NAME=ADDRESS",
        help="the plugins' network proxy resolves NAME to ADDRESS (an IP address), like curl's --resolve: a test "
        "host or a name your resolver does not know; the allowlist still decides, and a loopback or private "
        "ADDRESS still needs NAME in the plugin's network.private (repeatable; default: the system resolver)",
    )
    serve.add_argument(
        "--pass-proxy-env",
        action="store_true",
        help="pass proxy variables (HTTPS_PROXY, ...) to plugins (CA settings such as SSL_CERT_FILE always pass)",
    )


def resolve_pin(text: str) -> tuple[str, str]:
    """``--resolve NAME=ADDRESS`` as ``(canonical name, canonical address)``; ``argparse.ArgumentTypeError``
    names what is wrong (a name outside the allowlist grammar, an IP literal as NAME, no IP address)."""
    from hostd.net.allowlist import EntryError, canonical_host  # noqa: PLC0415  (only with --resolve)

    name, equals, address = text.partition("=")
    try:
        host, literal = canonical_host(name)
        if not equals or literal is not None:
            raise EntryError(f"{text!r}: write NAME=ADDRESS, NAME a host name")
        canonical, ip = canonical_host(address)
        if ip is None:
            raise EntryError(f"{text!r}: ADDRESS must be an IP address, not {address!r}")
    except EntryError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return host, canonical


def _hostd_or_warning(record: logging.LogRecord) -> bool:
    """Pass hostd's own records at the chosen level and other libraries' at WARNING and up only.

    The class kept out: a library's INFO/DEBUG lines (httpx2's and httpcore's request lines with the full
    URL, the mcp SDK's, keyring's) that hostd's redactor never sees and whose text may carry a credential
    (an OAuth redirect's ``code``, a key in a URL's query). hostd's own lines name plugins, never values.
    """
    return record.name == "hostd" or record.name.startswith("hostd.") or record.levelno >= logging.WARNING


def installer_table(path: str | None = None) -> str:
    """``hostd doctor``'s second table: the installer each package ecosystem uses, where it was found and the
    version it reports; deno too when it is on ``PATH``.

    ``path`` (``PATH`` syntax; None: hostd's ``PATH`` followed by the login shell's, as ``hostd serve``
    searches) is where :func:`hostd.install.installers.find_installer` looks. Each version query runs with ``PATH``
    and ``HOME`` only, reads at most 256 bytes for at most 5 s (:func:`hostd.install.runtimes.answer_of`); the
    first line of the answer is shown. Blocking.
    """
    from hostd.install.installers import find_installer  # noqa: PLC0415  (only this command needs it)
    from hostd.install.runtimes import answer_of  # noqa: PLC0415
    from sandbox.environment import login_shell_path, merge_paths  # noqa: PLC0415

    if path is None:
        path = merge_paths(os.environ.get("PATH", ""), login_shell_path())
    env = {"PATH": path, "HOME": os.path.expanduser("~")}
    rows = [("ecosystem", "installer", "version", "executable", "found")]
    wanted: list[tuple[str, Literal["uv", "npm", "node"] | None, str]] = [
        ("pypi", "uv", "uv"),
        ("npm", "npm", "npm"),
        ("npm", "node", "node"),
        ("deno", None, "deno"),
    ]
    for ecosystem, name, program in wanted:
        if name is not None:
            found = find_installer(name, path)
            executable, source = (None, found) if isinstance(found, str) else (found.executable, found.source)
        else:
            which = shutil.which(program, path=path)
            executable, source = (os.path.abspath(which), "PATH") if which else (None, f"{program} not on PATH")
        version = "-"
        if executable is not None:
            try:
                code, text = answer_of([executable, "--version"], env)
                first = text.splitlines()[0] if text else ""
                version = first if code == 0 and first else f"exit status {code}"
            except subprocess.TimeoutExpired:
                version = "no answer within 5 s"
            except OSError as exc:
                version = f"cannot run: {exc.strerror}"
        rows.append((ecosystem, program, version, executable or "-", source))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join(
        "  ".join([*(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)), row[4]]).rstrip()
        for row in rows
    )


def domain_filtering_line(capabilities: Iterable[Capability]) -> str:
    """``hostd doctor``'s verdict on network allowlists (issue 26): enforced where unprivileged network and pid
    namespaces work (the ``netproxy`` layer), else the sandbox level's all-or-nothing network; and the same for
    preparation's installers (the registries in use their allowlist: hostd/install/installer_network.py)."""
    have = {cap.name for cap in capabilities if cap.available}
    if {"netns", "pidns"} <= have:
        return (
            "domain filtering: yes - a plugin with a network allowlist runs in its own network namespace, hostd's "
            "proxy its only way out\n"
            "  transparent: yes - clients that ignore HTTP(S)_PROXY reach the allowlist's names too (hostd answers "
            "their DNS and accepts on ports 80, 443 and the allowlist's; sandbox/netns.py)\n"
            "  preparation: each installer reaches only the registries in use, through the same proxy (unless "
            "hostd's environment names a proxy of its own: then the first progress line says it is not filtered)\n"
        )
    return (
        "domain filtering: no - netns or pidns is unavailable: a plugin's network allowlist is not enforced, it "
        "has the sandbox level's network (standard: all, strict: none), as launch.capabilities.network says\n"
        "  preparation: not filtered either - an installer may reach any host, not only the registries in use\n"
    )


def doctor(state_dir: str | None) -> int:
    """``hostd doctor`` (and ``hostctl doctor``): print the isolation layers this machine offers, the installers,
    and what is wrong in ``state_dir`` when given (:func:`hostd.cli.checkup.check_state_folder`: it only reads);
    returns the exit code, 0."""
    from sandbox.probe import probe, render_table  # noqa: PLC0415  (only this command needs it)

    capabilities = probe()
    print(render_table(capabilities))
    print(domain_filtering_line(capabilities))
    print(installer_table())
    if state_dir is not None:
        from hostd.cli.checkup import check_state_folder  # noqa: PLC0415  (only this command needs it)

        print(f"\nstate folder {state_dir}:")
        for line in check_state_folder(Path(state_dir)):
            print(f"  {line}")
    return 0


def host_settings(module: ModuleType, args: argparse.Namespace, trust_roots: tuple[str, ...]) -> HostSettings:
    """The host's settings from ``serve``'s or ``mcp``'s arguments (``module``: ``hostd.host.service``, imported
    by the caller; ``mcp`` has no ``--trust`` and no ``--no-restore``: strict, and the enabled plugins start)."""
    settings: HostSettings = module.HostSettings(
        trust_development=getattr(args, "trust", "strict") == "development",
        pass_proxy=bool(args.pass_proxy_env),
        restart=args.restart,
        ping_interval=args.ping_interval,
        ping_timeout=args.ping_timeout,
        max_result_bytes=args.max_result_bytes,
        max_plugin_frame_bytes=args.max_plugin_message_bytes,
        sandbox=args.sandbox,
        max_rss_bytes=int(args.max_rss_mb * 1024 * 1024) if args.max_rss_mb else None,
        max_cpu_percent=args.max_cpu_percent,
        max_disk_bytes=int(args.max_disk_mb * 1024 * 1024) if args.max_disk_mb else None,
        allow_write=tuple(os.path.abspath(p) for p in args.allow_write),
        allow_read=tuple(os.path.abspath(p) for p in args.allow_read),
        login_path=not args.no_login_path,
        registries=module.Registries.from_environment(args.npm_registry, args.python_index),
        bundle_trust_roots=trust_roots,
        download_allow_private=tuple(args.allow_private_download),
        resolve=tuple(getattr(args, "resolve", ())),
        restore=not getattr(args, "no_restore", False),
    )
    return settings


def serve_arguments(argv: list[str]) -> argparse.Namespace:
    """``hostd serve``'s arguments parsed from ``argv`` (its words after ``hostd``); ``SystemExit`` on a bad one."""
    return _parser().parse_args(argv)


def trust_roots_of(args: argparse.Namespace) -> tuple[str, ...]:
    """The bundle trust roots: ``--bundle-trust-root``, else ``$HOSTD_BUNDLE_TRUST_ROOT`` (absolute paths)."""
    return tuple(
        os.path.abspath(p)
        for p in args.bundle_trust_root or os.environ.get("HOSTD_BUNDLE_TRUST_ROOT", "").split(os.pathsep)
        if p
    )


def _host_factory(args: argparse.Namespace, trust_roots: tuple[str, ...]) -> HostFactory:
    """What builds the host once ``initialize`` is answered: ``hostd.host.service`` imported in a worker thread,
    its settings taken from ``serve``'s arguments."""

    async def host_factory(options: InitializeOptions, notify: Notify, nursery: trio.Nursery) -> HostApi:
        # Imported here, after initialize was answered: this is the heavy part.
        module = await trio.to_thread.run_sync(importlib.import_module, "hostd.host.service")
        # A serving hostd's only (hostctl's direct read imports this module for host_settings: issue 28).
        from hostd.control.attach import Fanout, serve_control_socket  # noqa: PLC0415

        fanout = Fanout(notify)  # the parent, and each session on the control socket
        settings = host_settings(module, args, trust_roots)
        host: HostApi = await module.Host.create(options, fanout.notify, nursery, settings)
        store = options.state_store
        if store is not None and not args.no_control_socket:
            # Listening before the host is handed over: a client that reads this hostd's answers finds the socket.
            await nursery.start(serve_control_socket, host, store, fanout, current_outbox())
        return host

    return host_factory


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``hostd`` console script; returns the exit code."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code not in (0, None) else 0
    if args.command == "doctor":
        return doctor(args.state_dir)
    # pydantic looks for its plugins (entry points of every installed distribution: ~11 ms, before the
    # first model is built, so before the first host answer); hostd installs none and configures none.
    # A value the user set is kept.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, args.log_level.upper()),
        format="hostd %(levelname)s %(name)s: %(message)s",
    )
    for handler in logging.getLogger().handlers:
        handler.addFilter(_hostd_or_warning)
    # Descriptors: hostd's soft limit up to the hard one; its plugins get the old one back (sandbox/limits.py).
    before, after = raise_nofile_limit()
    logging.getLogger("hostd").debug("descriptor limit: soft %d -> %d", before, after)
    trust_roots = trust_roots_of(args)
    if trust_roots:
        from hostd.install.signing import load_trust_roots  # noqa: PLC0415  (only this flag pays for cryptography)

        try:
            load_trust_roots(trust_roots)  # a wrong file fails now, not at the first signed bundle
        except ValueError as exc:
            logging.getLogger("hostd").error("--bundle-trust-root: %s", exc)
            return EXIT_USAGE

    if args.command == "mcp":
        return _serve_mcp(args, trust_roots)
    host_factory = _host_factory(args, trust_roots)

    store: StateStore | None = None
    if args.state_dir is not None:
        store = StateStore(Path(args.state_dir))
        try:
            store.lock()  # fail fast, before any parent handshake: supervisors read the exit code
        except StateError as exc:
            logging.getLogger("hostd").error("%s", exc)
            return exc.exit_code
    from hostd.control.server import serve_stdio  # noqa: PLC0415 (serve's; not hostctl's direct read: issue 28)

    try:
        serve = functools.partial(
            serve_stdio,
            host_factory,
            state_dir=args.state_dir,
            state_store=store,
            max_frame_bytes=args.max_message_bytes,
            max_outbox_bytes=args.max_outbox_bytes,
        )
        return trio.run(serve)
    except KeyboardInterrupt:
        return 130
    except Exception:
        logging.getLogger("hostd").exception("internal error")
        return EXIT_SOFTWARE


def _serve_mcp(args: argparse.Namespace, trust_roots: tuple[str, ...]) -> int:
    """``hostd mcp``: lock the state folder (``STATE_LOCKED``'s exit code when another hostd serves it), then serve
    MCP on stdin/stdout until stdin ends (hostd/gateway/server.py)."""
    from hostd.storage.state import default_state_dir  # noqa: PLC0415

    store = StateStore(Path(args.state_dir) if args.state_dir is not None else default_state_dir())
    try:
        store.lock()
    except StateError as exc:
        logging.getLogger("hostd").error("%s", exc)
        return exc.exit_code
    module = importlib.import_module("hostd.host.service")
    gateway = importlib.import_module("hostd.gateway.server")
    settings = host_settings(module, args, trust_roots)
    options: dict[str, Any] = {
        "control_socket": not args.no_control_socket,
        "max_frame_bytes": args.max_message_bytes,
        "tool_search": args.tool_search,
    }
    if args.http is not None:
        serve = functools.partial(gateway.serve_gateway_http, store, settings, port=args.http, **options)
    else:
        serve = functools.partial(gateway.serve_gateway, store, settings, **options)
    try:
        code: int = trio.run(serve)
    except KeyboardInterrupt:
        return 130
    except Exception:
        logging.getLogger("hostd").exception("internal error")
        return EXIT_SOFTWARE
    return code


def end_process(code: int) -> NoReturn:
    """End this process with exit status ``code`` once all that Python's own exit does that anyone can see is
    done, skipping the rest: the interpreter's teardown (every module and object freed one by one), which costs a
    hostd that served about 50 ms of CPU after its answer to ``exit`` (issue 28; every test spawns such a hostd).

    What is done, in the order of Python's own exit (``Py_FinalizeEx``): every non-daemon thread is joined; the
    ``atexit`` functions run (``logging.shutdown`` flushes hostd's log handlers; ``weakref.finalize`` objects made
    with ``atexit=True``); ``sys.stdout`` and ``sys.stderr`` are flushed, and when that fails the status is 120,
    as Python's is. What is skipped holds nothing anyone reads: hostd keeps no buffered file open beyond a ``with``
    block and defines no ``__del__``; a daemon thread still running (the login shell's ``PATH`` lookup) stops with
    the process as it would at Python's exit, and its child runs on in either case. Children are reaped by
    whatever returned ``code`` (``exit`` answers after the host stopped every plugin). Never returns.
    """
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and not stream.closed:
            try:
                stream.flush()
            except (OSError, ValueError):
                code = 120  # Python's exit status when it cannot flush a standard stream at exit
    os._exit(code)


def run() -> NoReturn:
    """The ``hostd`` console script, ``python -m hostd`` and the sidecar: :func:`main` on ``sys.argv``, then
    :func:`end_process` with its exit status."""
    end_process(main())


if __name__ == "__main__":
    run()
