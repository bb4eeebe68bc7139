"""The launch resolver: from an installed plugin's manifest, settings, secrets' names, grants and prepared
environment to the exact :class:`sandbox.launch.Launch` the user approves, with its isolation policy.

:func:`resolve` does the work (in one worker thread: everything that touches the file system or runs a
process); :func:`applied_settings` substitutes the plugin's settings into its backend; :func:`isolation_policy`
builds its policy from the host's and what the parent granted; :func:`with_secrets` fills in the secrets for
spawning only. Written against :class:`LaunchHost`, the small interface they need of the host (its settings,
state folder, secret store and plugins), so this module does not import the host.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol, TypeVar

import trio

from hostd.host import installs
from hostd.host.records import HostSettings, InstalledPlugin, plugin_cache_env
from hostd.install.ecosystems import Prepared
from hostd.install.network_field import remote_entry
from hostd.install.packages import PrepareError, parse_package_launch
from hostd.install.prepare import find_prepared, plugin_root
from hostd.install.shims import Shim, find_shim, nvm_program, resolve_shim
from hostd.net.allowlist import canonical_entries
from hostd.storage import facts
from hostd.storage import secrets as secrets_
from hostd.storage.state import StateStore
from hostd.wire.errors import ErrorKind, HostError
from sandbox.environment import EnvPolicy
from sandbox.launch import Launch, LaunchError, resolve_launch
from sandbox.policy import IsolationPolicy
from sandbox.probe import shim_answer

_T = TypeVar("_T")


class LaunchHost(Protocol):
    """What the launch resolver needs of the host (:class:`hostd.host.service.Host` is one)."""

    @property
    def settings(self) -> HostSettings: ...

    @property
    def env_policy(self) -> EnvPolicy: ...

    @property
    def store(self) -> StateStore | None: ...

    @property
    def secret_store(self) -> secrets_.SecretStore | None: ...

    @property
    def plugins(self) -> Mapping[str, InstalledPlugin]: ...

    def report_from_thread(self, plugin_id: str | None, message: str) -> None:
        """Tell the parent about a damaged file; callable from any thread."""
        ...

    async def command_path(self) -> str:
        """hostd's ``PATH`` followed by the login shell's entries it lacks."""
        ...

    @property
    def login_path(self) -> str | None:
        """The login shell's ``PATH`` as looked up (``None``: not looked up, or the shell gave none)."""
        ...


async def resolve(host: LaunchHost, plugin: InstalledPlugin) -> Launch:
    """Resolve ``plugin``'s launch (:func:`sandbox.launch.resolve_launch`) in a worker thread.

    The class of work kept off the event loop here: everything that touches
    the file system or runs a process. What the policy needs from the other
    plugins is read here, on the loop (memory only); the policy's paths
    (``realpath``, ``isdir``) and the resolution (the first ``probe()`` runs
    a process, ~50-300 ms; the approval hashes files; every rule path is
    walked with ``lstat``) run in one worker thread, so ``ping`` and other
    plugins' calls go on meanwhile (tests/test_trust_offloop.py). Records
    the result (or the :class:`LaunchError`, re-raised) and the policy on
    ``plugin``. Cancellation waits for the thread (it is short and has no
    side effect but folders created).
    """
    backend = plugin.manifest.backend
    if backend.url is not None:  # a remote server: its endpoint is the launch (hostd/remote/endpoint.py)
        return await _resolve_remote(host, plugin)
    assert backend.command is not None  # the manifest requires it for stdio
    plugin.unpreparable = None
    try:
        package = parse_package_launch(backend.command, list(backend.args))
    except PrepareError as exc:
        # npx/uvx with an option that would change what is installed: shown as written, never started.
        package, plugin.unpreparable = None, str(exc)
    state_dir = host.store.directory if host.store is not None else None
    prepared: Prepared | None = None
    try:
        data_dir, tmpdir, host_vars = _writable_folders(host, plugin)
        build_policy = fenced_policy(host, plugin, isolation_policy(host, plugin, data_dir))
        command_path = await host.command_path()
        package_args = list(package.args) if package is not None else []
        seen: list[Prepared | None] = [None]  # the environment found, also when the launch then fails
        seen_shim: list[Shim | None] = [None]  # the shim the command is, also when the launch then fails

        def resolve() -> tuple[IsolationPolicy, Prepared | None, Launch]:
            # All of the file-system work in one worker thread: the prepared environment's marker,
            # the policy's paths, the settings and secrets' names, the launch.
            found_env = None
            if package is not None and state_dir is not None:
                found_env = seen[0] = find_prepared(state_dir, plugin.manifest.id, package)
            policy = build_policy()
            # user_config values and host variables (${HOME}...) are substituted first; secrets stay
            # ${secret:NAME} references until spawn (_gate), so the launch shown never holds one.
            applied = applied_settings(host, plugin)
            command, args = applied.command, list(applied.args)
            if found_env is not None:
                command, args = _prepared_command(command, args, found_env, package_args)

            def resolved(command: str) -> Launch:
                return resolve_launch(
                    command,
                    args,
                    plugin.path,
                    applied.env,
                    host.env_policy,
                    host_env={**os.environ, "PATH": command_path},
                    tmpdir=tmpdir,
                    isolation_policy=policy,
                    # The prepared entry's own variables (deno: DENO_DIR in the environment) come last.
                    host_vars={**host_vars, **found_env.env} if found_env is not None else host_vars,
                    needs=(
                        [*plugin.manifest.sandbox.read, *applied.read],
                        [*plugin.manifest.sandbox.write, *applied.write],
                    ),
                    grants=(plugin.folders.get("read", []), plugin.folders.get("write", [])),
                    prepared=found_env.record() if found_env is not None else None,
                )

            try:
                launch = resolved(command)
            except LaunchError as exc:
                # nvm has no shims: its node is on PATH only in a shell that loaded nvm.sh (an interactive one).
                shim = seen_shim[0] = through_nvm(exc, command) if found_env is None else None
                if shim is None or shim.real is None:
                    raise
                return policy, found_env, resolved(shim.real)
            if found_env is None:
                shim = seen_shim[0] = through_shim(command, launch.executable, plugin.path)
                if shim is not None and shim.real is not None:
                    launch = resolved(shim.real)
            return policy, found_env, launch

        policy, prepared, launch = await trio.to_thread.run_sync(_then_keep_facts(host, resolve))
    except LaunchError as exc:
        refused = _naming_the_owner(exc, [p for p in host.plugins.values() if p is not plugin])
        plugin.launch, plugin.launch_error = None, refused
        plugin.package, plugin.prepared, plugin.shim = package, seen[0], seen_shim[0]
        if refused is exc:
            raise
        raise refused from None
    plugin.launch, plugin.launch_error, plugin.policy = launch, None, policy
    plugin.package, plugin.prepared, plugin.shim = package, prepared, seen_shim[0]
    return launch


def _naming_the_owner(exc: LaunchError, others: list[InstalledPlugin]) -> LaunchError:
    """``exc``, or when it refuses a path that is another installed plugin's folder (``PATH_REFUSED``: a plugin's
    folder is its own), the same refusal naming that plugin and the two ways out. A new user's README walk imported
    a config whose script lay in a folder it then installed as a plugin: the refusal named only the path ("which no
    plugin may reach"), and the hint to reinstall the imported manifest came back unchanged. Pure."""
    if exc.kind != "PATH_REFUSED":
        return exc
    text = str(exc)
    for other in others:
        folder = str(other.path)
        if f"{folder}," in text or text.endswith(folder):
            owner = other.manifest.id
            return LaunchError(
                "PATH_REFUSED",
                exc.command,
                f"{text} ({folder} is the folder of plugin {owner}: a plugin's folder is its own; uninstall {owner}, "
                "or keep this server's files in a folder of their own)",
            )
    return exc


def keep_facts(directory: Path, login_path: str | None) -> None:
    """Keep for hostctl's reading commands what this hostd learnt by running a process (:mod:`hostd.storage.facts`,
    in ``directory``, its state folder): the login shell's ``PATH`` (``login_path``, looked up with this
    process's environment; ``None``: not looked up, or the shell gave none: not kept) and the sandbox probe's
    answer, once this process probed. Each under the key of what it depends on, computed here. Blocking (small
    reads, a write when it changed); never raises."""
    login = (facts.login_path_key(os.environ), login_path) if login_path is not None else None
    answer = shim_answer()
    facts.keep(directory, login, (facts.probe_key(), answer) if answer is not None else None)


def _then_keep_facts(host: LaunchHost, work: Callable[[], _T]) -> Callable[[], _T]:
    """``work``, then (whatever it raised) :func:`keep_facts` of ``host``'s state folder, in the same worker
    thread: done when the request that resolved answers. Nothing more for a reader (``HostSettings.read_only``)
    or a host without a state folder."""
    if host.settings.read_only or host.store is None:
        return work
    directory, login_path = host.store.directory, host.login_path

    def then() -> _T:
        try:
            return work()
        finally:
            keep_facts(directory, login_path)

    return then


def through_shim(command: str, executable: str, folder: Path) -> Shim | None:
    """The version manager's shim ``executable`` is (``command`` as found), with the real program it picks
    when its version files say so (:func:`hostd.install.shims.resolve_shim`, read with hostd's environment);
    ``None`` for a real program. The launch then runs ``Shim.real`` (an absolute path, shown and approved
    like any other; a change of the picked version changes the digest). Blocking (reads a few files)."""
    shim = find_shim(command, executable)
    return resolve_shim(shim, str(folder), os.environ) if shim is not None else None


def through_nvm(error: LaunchError, command: str) -> Shim | None:
    """nvm's program for a bare ``command`` (``node``, ``npm``...) that ``error`` says is on no ``PATH`` hostd has
    (its own and the login shell's), when nvm is installed (:func:`hostd.install.shims.nvm_program`, read with
    hostd's environment); ``None`` otherwise. With ``real``, the launch runs it (shown and approved like any
    other); without, ``reason`` says why, and the start failure's hint gives the fix. Blocking (reads a few
    files)."""
    if error.kind != "COMMAND_NOT_FOUND" or "/" in command:
        return None
    return nvm_program(command, os.environ)


def _writable_folders(host: LaunchHost, plugin: InstalledPlugin) -> tuple[Path | None, str | None, dict[str, str]]:
    """``(data folder, TMPDIR, host variables)`` of ``plugin``: ``(None, None, {})`` without a state folder."""
    data_dir = tmpdir = None
    host_vars: dict[str, str] = {}
    if host.store is not None:
        # Each plugin's writable folders are siblings under the state folder, never nested in one
        # another: a plugin cannot swap its TMPDIR for a link through its data folder.
        data_dir = host.store.directory / "data" / plugin.manifest.id
        tmpdir = str(host.store.directory / "tmp" / plugin.manifest.id)
        host_vars = plugin_cache_env(data_dir)
    return data_dir, tmpdir, host_vars


def _prepared_command(
    command: str, args: list[str], found_env: Prepared, package_args: list[str]
) -> tuple[str, list[str]]:
    """The prepared environment's program with the launch's own arguments (those after the package's)."""
    # Run the prepared environment's program: no package tool, no registry, no shared cache.
    try:
        found = parse_package_launch(command, args)
    except PrepareError:
        found = None
    rest = list(found.args) if found is not None else package_args
    return found_env.entry[0], [*found_env.entry[1:], *rest]


async def _resolve_remote(host: LaunchHost, plugin: InstalledPlugin) -> Launch:
    """:func:`resolve` of a remote plugin: its endpoint is the launch; reads which of its secrets are set."""
    from hostd.remote.endpoint import resolve_remote  # noqa: PLC0415 (a remote plugin's: a stdio one never loads it)

    remote = resolve_remote(plugin.manifest.backend, str(plugin.path))
    network = allowlist(plugin)
    own = remote_entry(remote.endpoint.url)
    if network is not None and own is not None:
        # Issue 26: what hostd itself may reach for this remote, its own endpoint always among them; every request
        # of its link is held to it (hostd/mcp/transport/http.py), shown and covered by the digest.
        remote = dataclasses.replace(remote, network=(tuple(canonical_entries([own, *network[0]])), tuple(network[1])))
    plugin.config_problem = None
    if host.secret_store is not None:  # which of its secrets are set (PluginInfo.userConfig)
        try:
            owner = installs.secret_owner(plugin.manifest.id, plugin.install)
            names = await trio.to_thread.run_sync(host.secret_store.names, owner)
            plugin.secret_names = set(names)
        except HostError as error:  # an unreadable secrets file: its enable fails with this
            plugin.config_problem = error
    plugin.launch, plugin.launch_error = remote, None
    return remote


def applied_settings(host: LaunchHost, plugin: InstalledPlugin) -> secrets_.Applied:
    """Read ``plugin``'s settings and stored secret names, and substitute them into its backend (blocking)."""
    backend, plugin_id = plugin.manifest.backend, plugin.manifest.id
    assert backend.command is not None  # called for stdio plugins only (resolve)
    plugin.config_problem = None
    if host.store is not None and host.secret_store is not None:
        # Only what the plugin uses is read: an unreadable secrets file fails only the plugins that
        # refer to secrets (STATE_FILE_UNREADABLE at their enable), never the others.
        options = plugin.manifest.user_config.values()
        try:
            if any(not option.sensitive for option in options):
                plugin.settings = secrets_.load_settings(host.store.directory, plugin_id, host.report_from_thread)
            if any(option.sensitive for option in options) or secrets_.references(
                [*backend.args, *backend.env.values()]
            ):
                plugin.secret_names = set(host.secret_store.names(installs.secret_owner(plugin_id, plugin.install)))
        except HostError as error:
            plugin.config_problem = error
    applied = secrets_.apply_settings(
        backend.command,
        args=backend.args,
        env=backend.env,
        options=plugin.manifest.user_config,
        settings=plugin.settings,
        secret_names=plugin.secret_names,
        home=str(Path.home()),
        expand_host_variables=plugin.manifest.origin is not None,
    )
    declared = set(plugin.manifest.user_config)
    unset = secrets_.references([*applied.args, *applied.env.values()]) - plugin.secret_names - declared
    plugin.config_missing = sorted({*applied.missing, *unset})
    return applied


def with_secrets(host: LaunchHost, plugin: InstalledPlugin, launch: Launch) -> Launch:
    """``launch`` with its ``${secret:NAME}`` references filled in, for spawning only (blocking)."""
    store = host.secret_store
    options = plugin.manifest.user_config

    owner = installs.secret_owner(plugin.manifest.id, plugin.install)  # the install's, not the id's

    def lookup(name: str) -> str | None:
        value = store.get(owner, name) if store is not None else None
        if value is None and name in options and not options[name].required:
            return ""  # an optional secret left unset
        return value

    refuse_secret_arguments(plugin, launch)
    return secrets_.inject(launch, lookup, plugin.manifest.id)


def refuse_secret_arguments(plugin: InstalledPlugin, launch: Launch) -> None:
    """Raise ``SECRET_IN_ARGUMENTS`` when ``launch``'s arguments hold a secret and the parent did not opt in.

    The class (issue 25, over-granting 2): a secret value on a command line, where every process of
    the machine (another plugin under ``strict`` too) reads it in ``/proc/<pid>/cmdline``. Members:
    ``${secret:NAME}`` as a whole argument, inside ``--token=${secret:NAME}``, a ``sensitive`` bundle
    option used in ``args`` (it becomes ``${secret:X}`` at install). ``data.remedy``: the file channel's
    manifest words for each (``${user_config.X:file}``, ``${secret:NAME:file}``: the argument gets the
    path of a ``0600`` file in the plugin's TMPDIR, never the value). Secrets in ``env`` are not
    refused: a process's environment is readable only by its own user, and Landlock's ptrace scoping
    keeps other plugins out. The opt-in is ``plugins/grant`` ``secretArguments: true``, which marks
    the approval digest and is shown as ``launch.secretArguments``. ``data.secrets``: the names, sorted.
    """
    names = sorted(secrets_.references(launch.args, channel="value"))  # a :file reference puts only a path there
    if names and not plugin.secret_arguments:
        plugin_id = plugin.manifest.id
        options = plugin.manifest.user_config
        files = [
            (options_ref if name in options else secrets_.secret_file_ref(name))
            for name in names
            for options_ref in ["${user_config." + name + ":file}"]
        ]
        raise HostError(
            ErrorKind.SECRET_IN_ARGUMENTS,
            f"plugin {plugin_id} would get the secrets {', '.join(names)} on its command line, which every process "
            f"of the machine can read: pass them in env, or as a 0600 file whose path the argument names "
            f"(write {', '.join(files)} in the manifest's args), or allow it with plugins/grant secretArguments: true",
            plugin=plugin_id,
            secrets=names,
            remedy=files,
        )


def allowlist(plugin: InstalledPlugin) -> tuple[list[str], list[str]] | None:
    """The plugin's network allowlist ``(hosts, private)`` as canonical entries (hostd/net/allowlist.py), or
    None when it has none: the manifest's ``network.hosts`` and what the parent granted (``plugins/grant
    networkHosts``), and the manifest's ``network.private``. A plugin without a ``network`` field and without
    a grant has no allowlist (its network is the sandbox level's, as before issue 26); with an empty one it
    reaches nothing but what is granted later."""
    declared = plugin.manifest.network
    if declared is None and not plugin.network_hosts:
        return None
    hosts = canonical_entries([*(declared.hosts if declared else []), *plugin.network_hosts])
    return hosts, canonical_entries(declared.private if declared else [])


def isolation_policy(host: LaunchHost, plugin: InstalledPlugin, data_dir: Path | None) -> Callable[[], IsolationPolicy]:
    """The plugin's isolation policy: host policy plus what the parent granted it.

    What no rule may reach comes from the host's own layout: the state
    folder and the user's home are never covered, other plugins'
    writable folders hold no link a rule may follow, and no plugin
    writes any plugin's folder. The plugins are read now (memory only);
    the returned function does the file-system part (every path
    resolved, ``isdir``): blocking, for a worker thread.
    """
    others = [p for p in host.plugins.values() if p is not plugin]
    settings = host.settings
    state_dir = host.store.directory if host.store is not None else None
    other_folders = [p.path for p in others]
    every_folder = [p.path for p in host.plugins.values()]
    granted: list[str] = []  # what each other plugin may write: its grants, as last resolved
    maybe_folders: list[str] = []  # or, unresolved, the absolute arguments that are folders
    for other in others:
        if other.launch is not None and other.launch.plan is not None:
            granted += other.launch.plan.extra_write
        else:
            maybe_folders += [a for a in other.manifest.backend.args if os.path.isabs(a)]
    ports = sorted(plugin.network_ports)
    proxy = allowlist(plugin)
    limits = dict(plugin.limits)
    # Call-time grants (hostd/host/call_grants.py) are recorded grants the user gave for a file a tool call
    # named: rules of the plan, never of the launch the digest covers, so a grant does not void the approval.
    call_read = [path for path, access in plugin.path_grants().items() if access == "read"]
    call_write = [path for path, access in plugin.path_grants().items() if access == "write"]

    def build() -> IsolationPolicy:
        protected = [os.path.realpath(Path.home()), *(os.path.realpath(f) for f in other_folders)]
        writable: list[str] = [*settings.allow_write]
        if state_dir is not None:
            state = os.path.realpath(state_dir)
            protected.append(state)
            writable += [os.path.join(state, "data"), os.path.join(state, "tmp")]
        writable += [*granted, *filter(os.path.isdir, maybe_folders)]
        policy = settings.isolation_policy(
            data_dir,
            tcp_ports=ports,
            proxy=proxy,
            max_rss_bytes=limits.get("max_rss_bytes"),
            max_cpu_percent=limits.get("max_cpu_percent"),
            protected=protected,
            writable=[os.path.realpath(w) for w in writable],
            code=[os.path.realpath(f) for f in every_folder],
        )
        if not policy.landlock or not (call_read or call_write):
            return policy
        return dataclasses.replace(
            policy,
            extra_read_paths=(*policy.extra_read_paths, *call_read),
            extra_write_paths=(*policy.extra_write_paths, *call_write),
        )

    return build


def fenced_policy(
    host: LaunchHost, plugin: InstalledPlugin, build: Callable[[], IsolationPolicy]
) -> Callable[[], IsolationPolicy]:
    """``build`` with hostd's own tree and the other plugins' folders fenced (issue 25, over-granting 1).

    No rule may be, cover or lie inside the state folder (``secrets``,
    ``credentials``, ``bundles``, ``registry``, ``state.json``, logs, other
    plugins' ``data``, ``tmp`` and ``prepared`` folders) or another plugin's
    folder, whatever route names it (``..``, a symlink, an env value, a grant):
    :func:`sandbox.policy.fence_rules` checks the real paths. The exceptions
    are the plugin's own data folder and ``TMPDIR`` and, read-only, its own
    folder and ``<state>/prepared/<id>``. The plugins are read now (memory
    only); the returned function resolves paths (blocking, worker thread).
    """
    state_dir = host.store.directory if host.store is not None else None
    others = [str(p.path) for p in host.plugins.values() if p is not plugin]

    def build_fenced() -> IsolationPolicy:
        policy = build()
        if not policy.landlock:
            return policy
        fences = [os.path.realpath(f) for f in others]
        own_read: list[str] = []
        if state_dir is not None:
            fences.append(os.path.realpath(state_dir))
            own_read.append(os.path.realpath(plugin_root(state_dir, plugin.manifest.id)))
        return dataclasses.replace(policy, fenced_paths=tuple(fences), own_read_paths=tuple(own_read))

    return build_fenced
