"""Launch resolution: from a manifest's command to an exact, approvable launch.

Theory of operation. :func:`resolve_launch` turns ``command`` + ``args`` +
the manifest's ``env`` into a :class:`Launch` value: the absolute executable,
the complete child environment, the working folder and the isolation layers.
Nothing is run and there is never a shell: the argument vector goes to
``execve`` as it is.

- A bare name (no ``/``) is looked up with :func:`shutil.which` on the
  child's trimmed ``PATH`` (absolute entries only), so the plugin's own
  folder is never searched implicitly.
- A relative command containing ``/`` (``./server``) must, after resolving
  symlinks, lie inside the plugin folder and be an executable regular file.
- An absolute command is the user's own program (a virtual environment's
  ``python``, ``/opt/homebrew/bin/npx``): any executable regular file, kept
  unresolved so a venv interpreter still finds its ``pyvenv.cfg``; what it
  really runs is shown in ``Launch.runtime`` and covered by the digest.

:attr:`Launch.digest` identifies the launch for trust approval. It covers
what the plugin author controls (executable, command, args, cwd, the names of
the environment variables, the manifest's env items, the isolation layers)
but not host-dependent values such as the value of ``PATH`` or ``HOME``, so
an approval survives a change of the user's shell profile.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import stat
import tempfile
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.environment import (
    CA_VARS,
    EnvironmentPolicyError,
    EnvPolicy,
    build_environment,
    is_secret_name,
    trim_path,
)
from sandbox.home_view import HomeView, make_view, plan_view
from sandbox.netns import proxy_environment
from sandbox.paths import PathRefused, ensure_private_dir, is_inside
from sandbox.policy import (
    IsolationPlan,
    IsolationPolicy,
    IsolationUnavailable,
    base_layers,
    landlock_rules,
    plan_layers,
    runtime_chain,
)
from sandbox.probe import probe

__all__ = [
    "DEFAULT_ISOLATION",
    "Launch",
    "LaunchError",
    "plugin_tmpdir",
    "resolve_launch",
]

#: Layers :func:`resolve_launch` puts in force without an isolation policy: the
#: supervisor shim (subreaper, lifeline, parent-death signal, whole-tree kill),
#: safe rlimits (``CORE=0``, bounded ``NOFILE``) and ``PR_SET_NO_NEW_PRIVS``
#: (Linux only).
DEFAULT_ISOLATION: tuple[str, ...] = base_layers()

_KINDS = frozenset(
    {
        "COMMAND_NOT_FOUND",
        "COMMAND_OUTSIDE_PLUGIN",
        "ENV_POLICY",
        "EXEC_FAILED",
        "ISOLATION_FAILED",
        "ISOLATION_UNAVAILABLE",
        "PATH_REFUSED",
    }
)


class LaunchError(Exception):
    """A plugin cannot be launched.

    ``kind`` is one of ``"COMMAND_NOT_FOUND"`` (no such command on the PATH,
    or the path does not exist / is not an executable file),
    ``"COMMAND_OUTSIDE_PLUGIN"`` (a path command resolves outside the plugin
    folder), ``"ENV_POLICY"`` (the manifest env breaks the
    :class:`~sandbox.environment.EnvPolicy`), ``"EXEC_FAILED"`` (the
    process could not be started; the message carries the errno text),
    ``"ISOLATION_UNAVAILABLE"`` (at resolution: the isolation policy asks
    for a protection this machine cannot give, e.g. network denial with
    neither a network namespace nor Landlock TCP rules) or
    ``"ISOLATION_FAILED"`` (at spawn: a layer of ``Launch.isolation`` could
    not be applied; nothing runs, never a weaker plugin) or
    ``"PATH_REFUSED"`` (a path a rule would name resolves through a link a
    plugin can write, covers a protected folder, or a program of the runtime
    lies where a plugin can write; see :mod:`sandbox.paths`).
    ``command`` is the command as the manifest wrote it. The message always
    names the command; for ``COMMAND_NOT_FOUND`` of a bare name it also gives
    the ``PATH`` that was searched.
    """

    def __init__(self, kind: str, command: str, message: str) -> None:
        if kind not in _KINDS:
            raise ValueError(f"unknown LaunchError kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.command = command


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return types.MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class Launch:
    """An exact, resolved launch of one plugin.

    ``command``: as the manifest wrote it (also used as ``argv[0]``).
    ``executable``: absolute path handed to ``execve`` (symlinks resolved for
    path commands; the ``PATH`` hit, unresolved, for bare names).
    ``args``: the arguments after ``argv[0]``. ``cwd``: the plugin folder,
    absolute. ``env``: the complete child environment (read-only mapping).
    ``isolation``: the layers that will be in force, in
    :data:`~sandbox.policy.LAYER_ORDER`, e.g. ``("shim", "rlimits",
    "no_new_privs", "landlock-fs", "landlock-net", "landlock-scope",
    "netns", "seccomp")``; :func:`sandbox.process.spawn` uses the shim only
    when ``"shim"`` is listed and fails rather than apply fewer.
    ``manifest_env``: the manifest's env as given. ``plan``: the folders and
    ports the layers need (``None`` without an isolation policy; then
    :func:`~sandbox.process.spawn` refuses Landlock layers with
    ``ISOLATION_FAILED`` rather than guess the writable folders).
    ``runtime``: the real paths of what runs, the executable first, then each
    ``#!`` interpreter (:func:`sandbox.policy.runtime_chain`). ``files``:
    ``(real path, "sha256:<hex>")`` of the content that runs: the executable
    when it lies in the plugin folder or is a script, and every file inside
    the plugin folder an argument names. ``folders``: ``(argument or
    "$NAME", real path)`` for each argument or manifest env value naming a
    folder, a file outside the plugin folder, or a path still to be created
    (``~`` expanded); with ``IsolationPolicy.grant_named_paths`` they become
    grants (:func:`named_grants`). ``prepared``: what an install-time
    preparation put in the environment the launch runs from (``manager``,
    ``packages``, ``resolved``, ``lockfile``, ``root``; empty when the launch
    was not prepared), shown and covered by the digest. ``network``: the
    plugin's allowlist as ``(hosts, private)``, canonical entries, sorted
    (``IsolationPolicy.proxy_hosts`` / ``proxy_private``; ``None`` when it
    has none), shown and covered by the digest.
    """

    command: str
    executable: str
    args: tuple[str, ...]
    cwd: str
    env: Mapping[str, str] = field(hash=False)
    isolation: tuple[str, ...]
    manifest_env: Mapping[str, str] = field(hash=False)
    plan: IsolationPlan | None = None
    runtime: tuple[str, ...] = ()
    files: tuple[tuple[str, str], ...] = ()
    folders: tuple[tuple[str, str], ...] = ()
    prepared: tuple[tuple[str, str], ...] = ()
    network: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    #: The plugin's private ``HOME`` (``env["HOME"]``) and its links into the real one
    #: (:mod:`sandbox.home_view`); remade before every start. Host-dependent: not in the digest.
    home: HomeView | None = field(default=None, compare=False)
    #: Secret values to deliver as files, ``(absolute path, value)``: written ``0600`` before every start
    #: (:func:`sandbox.paths.write_private_file`), in the plugin's TMPDIR, which is emptied when it stops.
    #: Filled in only for spawning (hostd.storage.secrets.inject); never shown, logged nor digested.
    secret_files: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "isolation", tuple(self.isolation))
        object.__setattr__(self, "env", _frozen(self.env))
        object.__setattr__(self, "manifest_env", _frozen(self.manifest_env))

    @property
    def argv(self) -> list[str]:
        """The argument vector: ``[command, *args]``."""
        return [self.command, *self.args]

    @property
    def env_keys(self) -> list[str]:
        """The names of the child environment, sorted."""
        return sorted(self.env)

    @property
    def digest(self) -> str:
        """``"sha256:<64 hex>"`` over what the user approves: what runs, with what, under which layers.

        Covers executable, command, args, cwd, env_keys, the manifest env
        items, isolation (plus the connectable TCP ports when
        ``landlock-net`` is listed), the real paths of the runtime, the
        content hashes of ``files``, the real paths of ``folders``, the
        allowlist (``network``, when the plugin has one) and, for
        a prepared launch, what was installed (``prepared``), serialised as
        canonical JSON. So replacing a script after approval, or a folder
        argument by a link elsewhere, voids the approval.
        Host-dependent values (the value of ``PATH``, ``HOME``, ``TMPDIR``,
        the data folder ...) are left out.
        """
        payload = {
            "args": list(self.args),
            "command": self.command,
            "cwd": self.cwd,
            "envKeys": self.env_keys,
            "executable": self.executable,
            "files": [list(item) for item in self.files],
            "folders": [list(item) for item in self.folders],
            "isolation": list(self.isolation),
            "manifestEnv": sorted([k, v] for k, v in self.manifest_env.items()),
            "runtime": list(self.runtime),
            "v": 2,
        }
        if self.prepared:
            payload["prepared"] = dict(self.prepared)
        if self.network is not None:
            payload["network"] = {"hosts": list(self.network[0]), "private": list(self.network[1])}
        if "landlock-net" in self.isolation:
            payload["tcpPorts"] = list(self.plan.tcp_ports) if self.plan is not None else []
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()

    def describe(self) -> dict[str, object]:
        """A JSON-ready summary for approval prompts and logs: everything the digest covers.

        Keys: ``command`` (str), ``executable`` (str), ``runtime`` (list of
        real paths: executable, then interpreters), ``args`` (list of str),
        ``files`` (``{real path: "sha256:<hex>"}``), ``folders`` (``{argument:
        real path}``), ``cwd`` (str), ``envKeys`` (sorted list of str),
        ``env`` (the manifest's variables: name -> value, or ``null`` for a
        secret, whose value the digest still covers), ``isolation`` (list of
        str), ``prepared`` (``{manager, packages, resolved, lockfile, root}``,
        only for a prepared launch), ``network`` (``{hosts, private}``, only
        for a plugin with an allowlist), ``digest`` (str). Values the host supplies (``PATH``,
        ``HOME``...) are left out.
        """
        return {
            "command": self.command,
            "executable": self.executable,
            "runtime": list(self.runtime),
            "args": list(self.args),
            "files": dict(self.files),
            "folders": dict(self.folders),
            "cwd": self.cwd,
            "envKeys": self.env_keys,
            "env": {k: (None if is_secret_name(k) else v) for k, v in sorted(self.manifest_env.items())},
            "isolation": list(self.isolation),
            **({"prepared": dict(self.prepared)} if self.prepared else {}),
            **(
                {"network": {"hosts": list(self.network[0]), "private": list(self.network[1])}}
                if self.network is not None
                else {}
            ),
            "digest": self.digest,
        }


def plugin_tmpdir(plugin_dir: Path) -> str:
    """Create (if needed) and return the plugin's private temporary folder.

    The folder is ``<tempfile.gettempdir()>/hostd-<uid>-<12 hex of the plugin
    folder's path hash>``, mode ``0700``. If that name exists but is not a
    real folder owned by this user (a symlink or another user's folder planted
    in a shared ``/tmp``), a fresh ``tempfile.mkdtemp`` folder is returned
    instead. Raises ``OSError`` if no folder can be created.
    """
    key = hashlib.sha256(str(plugin_dir.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    path = os.path.join(tempfile.gettempdir(), f"hostd-{os.geteuid()}-{key}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(path, 0o700)
        return path
    return tempfile.mkdtemp(prefix=f"hostd-{os.geteuid()}-{key}-")


def _resolve_path_command(command: str, root: str) -> str:
    """The executable for a command with a ``/``.

    Absolute: the user's own program (``/home/ada/proj/.venv/bin/python``,
    ``/opt/homebrew/bin/npx``), shown and approved like a ``PATH`` hit; it is
    kept unresolved, so a virtual environment's ``python`` (a link to its
    base interpreter) still finds its ``pyvenv.cfg``. Relative: the plugin's
    own program, which must resolve inside the plugin folder.
    """
    if os.path.isabs(command):
        resolved = os.path.realpath(command)
        executable = os.path.normpath(command)
    else:
        resolved = executable = os.path.realpath(os.path.join(root, command))
    if not os.path.isabs(command) and not is_inside(resolved, root):
        raise LaunchError(
            "COMMAND_OUTSIDE_PLUGIN",
            command,
            f"command {command!r} resolves to {resolved}, outside the plugin folder {root}",
        )
    try:
        st = os.stat(resolved)
    except OSError as exc:
        raise LaunchError(
            "COMMAND_NOT_FOUND",
            command,
            f"command {command!r} not found: {resolved}: {exc.strerror}",
        ) from exc
    if not stat.S_ISREG(st.st_mode):
        raise LaunchError("COMMAND_NOT_FOUND", command, f"command {command!r}: {resolved} is not a file")
    if not os.access(resolved, os.X_OK):
        raise LaunchError("COMMAND_NOT_FOUND", command, f"command {command!r}: {resolved} is not executable")
    return executable


def _checked_root(command: str, args: Sequence[str], plugin_dir: Path) -> str:
    """The plugin folder's real path, once it exists and neither ``command`` nor an argument holds a NUL.

    Part of :func:`resolve_launch`; raises :class:`LaunchError` ``"EXEC_FAILED"``.
    """
    root = os.path.realpath(plugin_dir)
    if not os.path.isdir(root):
        raise LaunchError("EXEC_FAILED", command, f"plugin folder {root} of command {command!r} is missing")
    for index, arg in enumerate([command, *args]):
        if "\0" in arg:
            raise LaunchError("EXEC_FAILED", command, f"argument {index} of {command!r} contains a NUL byte")
    return root


def _find_command(command: str, root: str, env: Mapping[str, str]) -> str:
    """The absolute path of ``command``: a path inside ``root`` (:func:`_resolve_path_command`) or a bare name
    looked up on the child's trimmed ``PATH`` (from ``env``, the child's environment).

    Part of :func:`resolve_launch`; raises :class:`LaunchError` ``"COMMAND_NOT_FOUND"`` (the message names the
    ``PATH`` searched) or ``"COMMAND_OUTSIDE_PLUGIN"``.
    """
    if not command:
        raise LaunchError("COMMAND_NOT_FOUND", command, "the command is empty")
    if "/" in command:
        executable = _resolve_path_command(command, root)
    else:
        search = trim_path(env.get("PATH", ""))
        found = shutil.which(command, path=search) if search else None
        if found is None:
            raise LaunchError(
                "COMMAND_NOT_FOUND",
                command,
                f"command {command!r} not found on PATH={search!r}",
            )
        executable = os.path.abspath(found)
    return executable


def resolve_launch(
    command: str,
    args: Sequence[str],
    plugin_dir: Path,
    manifest_env: Mapping[str, str],
    policy: EnvPolicy,
    *,
    host_env: Mapping[str, str] | None = None,
    tmpdir: str | None = None,
    isolation_policy: IsolationPolicy | None = None,
    host_vars: Mapping[str, str] | None = None,
    needs: tuple[Sequence[str], Sequence[str]] = ((), ()),
    grants: tuple[Sequence[str], Sequence[str]] = ((), ()),
    prepared: Mapping[str, str] | None = None,
) -> Launch:
    """Resolve a manifest's launch into a :class:`Launch`; runs nothing.

    ``command``: a bare name (looked up on the child's trimmed ``PATH``) or a
    path (relative to ``plugin_dir`` or absolute) that must resolve, after
    symlinks, inside ``plugin_dir``. ``args``: further arguments, passed without
    a shell; a leading ``~``/``${HOME}``/``${data}`` is expanded
    (:func:`expand_argument`). ``plugin_dir``: the plugin folder; it becomes
    ``cwd``. ``host_env``: defaults to ``os.environ``. ``tmpdir``: the
    child's ``TMPDIR``; default :func:`plugin_tmpdir` (created ``0700``).
    ``host_vars``: variables the host sets last, over the manifest's (the
    plugin's own cache folders). ``needs``: the manifest's declared
    ``(sandbox.read, sandbox.write)`` paths (``~``, ``${HOME}``, ``${data}``
    expanded), listed in ``folders`` and granted under a policy with
    ``grant_named_paths``. ``grants``: the folders the parent granted this
    plugin (``plugins/grant {folders}``), ``(read, write)``, handled like
    ``needs`` (labels ``grant.read[i]``, ``grant.write[i]``). ``prepared``: the
    record of the environment the launch runs from (:attr:`Launch.prepared`);
    its ``root`` becomes readable (never writable). ``isolation_policy``: ``None`` gives
    :data:`DEFAULT_ISOLATION`; a policy
    gives exactly the layers :func:`sandbox.policy.plan_layers` finds
    enforceable here (from :func:`sandbox.probe.probe`, cached; the first
    call costs ~50 ms) and creates its ``data_dir`` (``0700``). Under
    ``landlock-fs`` with a ``data_dir`` the child's ``HOME`` becomes the
    plugin's private view, ``<data_dir>/home`` (:mod:`sandbox.home_view`,
    made here and again before every start; :attr:`Launch.home`), after every
    path was expanded and granted with the real ``HOME``.

    Raises :class:`LaunchError` with ``kind`` ``"COMMAND_NOT_FOUND"``
    (message names the command and the ``PATH`` searched),
    ``"COMMAND_OUTSIDE_PLUGIN"``, ``"ENV_POLICY"`` (wrapping an
    :class:`~sandbox.environment.EnvironmentPolicyError`) or
    ``"EXEC_FAILED"`` (the plugin folder is missing, an argument contains
    a NUL byte, or the data folder or the private ``HOME`` cannot be created) or
    ``"ISOLATION_UNAVAILABLE"`` (the policy cannot be enforced here).
    """
    root = _checked_root(command, args, plugin_dir)
    if tmpdir is None:
        tmpdir = plugin_tmpdir(Path(root))
    try:
        env = build_environment(os.environ if host_env is None else host_env, manifest_env, policy, tmpdir=tmpdir)
    except EnvironmentPolicyError as exc:
        raise LaunchError("ENV_POLICY", command, f"command {command!r}: {exc}") from exc
    env.update(host_vars or {})

    executable = _find_command(command, root, env)

    runtime = runtime_chain(executable, env.get("PATH", ""))
    data_dir = isolation_policy.data_dir if isolation_policy is not None else None
    # Env values naming a path reach the server expanded: it does not expand ~ (no shell runs).
    for name, value in manifest_env.items():
        expanded = expand_home(value, env.get("HOME"), data_dir)
        if expanded is not None and not os.path.isabs(value):
            env[name] = expanded
    files, folders = _named_paths(args, root, manifest_env, env.get("HOME"), data_dir)
    # Arguments too reach the program expanded: what the launch shows, hashes and grants is what runs
    # (an interpreter given "~/srv/server.py" would look for a folder named "~" in the plugin folder).
    args = [expand_argument(arg, env.get("HOME"), data_dir) for arg in args]
    if prepared and prepared.get("root"):
        # The prepared program (an argument inside the environment) is pinned by its hash and the record,
        # and readable with the environment: it is no folder the user grants.
        env_root = os.path.realpath(prepared["root"])
        folders = [item for item in folders if not is_inside(item[2], env_root)]
    declared = _declared_paths(needs, env.get("HOME"), data_dir)
    declared += _declared_paths(grants, env.get("HOME"), data_dir, source="grant")
    folders += declared
    try:
        if _runs_as_content(runtime[0][1], root):
            files.insert(0, (runtime[0][1], _content_digest(runtime[0][1])))
    except OSError as exc:
        raise LaunchError(
            "COMMAND_NOT_FOUND", command, f"command {command!r}: cannot read {executable}: {exc}"
        ) from exc

    isolation = DEFAULT_ISOLATION
    plan: IsolationPlan | None = None
    if isolation_policy is not None:
        isolation, plan = _isolation_plan(
            isolation_policy,
            command=command,
            executable=executable,
            root=root,
            env=env,
            manifest_env=manifest_env,
            tmpdir=tmpdir,
            found=(files, folders, declared),
            prepared=prepared,
            runtime=runtime,
        )
        if "netproxy" in isolation:
            env.update(proxy_environment())  # the plugin's one way out (sandbox/netns.py), set last

    home = _private_home(command, isolation, plan, env, folders) if plan is not None else None

    return Launch(
        command=command,
        executable=executable,
        args=tuple(args),
        cwd=root,
        env=env,
        isolation=isolation,
        manifest_env=manifest_env,
        plan=plan,
        runtime=tuple(dict.fromkeys(real for _, real in runtime)),
        files=tuple(dict.fromkeys(files)),
        folders=tuple(dict.fromkeys((label, real) for label, _, real in folders)),
        prepared=tuple(sorted((prepared or {}).items())),
        network=_allowlist(isolation_policy),
        home=home,
    )


def _allowlist(policy: IsolationPolicy | None) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """``Launch.network`` from the policy: ``(hosts, private)`` sorted and de-duplicated, or None."""
    if policy is None or policy.proxy_hosts is None:
        return None
    return tuple(sorted(set(policy.proxy_hosts))), tuple(sorted(set(policy.proxy_private)))


def _private_home(
    command: str,
    isolation: tuple[str, ...],
    plan: IsolationPlan,
    env: dict[str, str],
    folders: Sequence[tuple[str, str, str]],
) -> HomeView | None:
    """:func:`resolve_launch`'s private ``HOME`` step (issue 25, under-granting item 5; :mod:`sandbox.home_view`).

    Under ``landlock-fs`` with a data folder, ``env["HOME"]`` becomes ``<data>/home`` and the view is
    made: links to what the launch grants under the real ``HOME`` (``folders``, as named and real, and
    the rule paths) and to :data:`~sandbox.home_view.RESERVED`. Called after every path was expanded and
    every rule computed with the real ``HOME``. ``None`` (``HOME`` unchanged) otherwise. Raises
    :class:`LaunchError` ``EXEC_FAILED`` when the view cannot be made.
    """
    home = env.get("HOME")
    if "landlock-fs" not in isolation or plan.data_dir is None or not home or not os.path.isabs(home):
        return None
    real_home = os.path.realpath(home)
    rules = plan.rule_lists()
    granted = [p for _, named, real in folders for p in (named, real)] + rules.get("read", []) + rules.get("write", [])
    # A rule holds a real path; where HOME itself is reached through a link, name it under HOME as given.
    granted = [
        os.path.join(home, os.path.relpath(p, real_home)) if real_home != home and is_inside(p, real_home) else p
        for p in granted
    ]
    view = plan_view(plan.data_dir, home, granted)
    try:
        make_view(view)
    except (OSError, PathRefused) as exc:
        raise LaunchError("EXEC_FAILED", command, f"private HOME of {command!r}: {exc}") from exc
    env["HOME"] = view.path
    return view


def _isolation_plan(
    isolation_policy: IsolationPolicy,
    *,
    command: str,
    executable: str,
    root: str,
    env: dict[str, str],
    manifest_env: Mapping[str, str],
    tmpdir: str,
    found: tuple[list[tuple[str, str]], list[tuple[str, str, str]], list[tuple[str, str, str]]],
    prepared: Mapping[str, str] | None,
    runtime: list[tuple[str, str]],
) -> tuple[tuple[str, ...], IsolationPlan]:
    """:func:`resolve_launch`'s isolation step: the layers ``isolation_policy`` gets here and the plan they enforce.

    ``found`` is ``(files, folders, declared)`` as :func:`resolve_launch` collected them. Creates the private
    ``tmpdir`` and the policy's ``data_dir``. Raises :class:`LaunchError` ``ISOLATION_UNAVAILABLE``,
    ``EXEC_FAILED`` (a private folder) or ``PATH_REFUSED``.
    """
    files, folders, declared = found
    try:
        isolation = plan_layers(isolation_policy, probe())
    except IsolationUnavailable as exc:
        raise LaunchError("ISOLATION_UNAVAILABLE", command, f"command {command!r}: {exc}") from exc
    data_dir = None
    try:
        ensure_private_dir(tmpdir)
        if isolation_policy.data_dir is not None:
            data_dir = ensure_private_dir(isolation_policy.data_dir)
    except (OSError, PathRefused) as exc:
        raise LaunchError("EXEC_FAILED", command, f"private folder of {command!r}: {exc}") from exc
    named = [item for item in folders if not item[0].startswith(("sandbox.", "grant."))]
    grant_read, grant_write = named_grants(named) if isolation_policy.grant_named_paths else ([], [])
    if isolation_policy.grant_named_paths:
        grant_read += [path for label, path, _ in declared if label.startswith(("sandbox.read", "grant.read"))]
        grant_write += [path for label, path, _ in declared if label.startswith(("sandbox.write", "grant.write"))]
    if prepared and prepared.get("root"):
        # The prepared environment (the package and its dependencies): read and run, never written.
        grant_read.append(prepared["root"])
    # The user's CA files (passed from the host environment) must be readable to be of use.
    trust = [env[n] for n in CA_VARS if n in env and os.path.isabs(env[n]) and n not in manifest_env]
    plan = IsolationPlan(
        tmpdir=tmpdir,
        data_dir=data_dir,
        tcp_ports=isolation_policy.allowed_tcp_ports if "landlock-net" in isolation else (),
        deny_unix_sockets=isolation_policy.network == "deny" or "netproxy" in isolation,
        extra_read=(*isolation_policy.extra_read_paths, *grant_read, *trust),
        extra_write=(*isolation_policy.extra_write_paths, *grant_write),
    )
    if "landlock-fs" in isolation:
        try:
            rules = landlock_rules(
                executable=executable,
                plugin_dir=root,
                path_env=env.get("PATH", ""),
                plan=plan,
                home=env.get("HOME"),
                protected=isolation_policy.protected_paths,
                writable=isolation_policy.writable_paths,
                code=isolation_policy.code_paths,
                chain=runtime,
                fenced=isolation_policy.fenced_paths,
                own_read=isolation_policy.own_read_paths,
            )
            _refuse_code_in_writable(
                [real for real, _ in files],
                [*isolation_policy.writable_paths, *rules["write"]],
            )
        except PathRefused as exc:
            raise LaunchError("PATH_REFUSED", command, f"command {command!r}: {exc}") from exc
        plan = dataclasses.replace(plan, rules=tuple((k, tuple(v)) for k, v in rules.items()))
    return isolation, plan


def _refuse_code_in_writable(programs: Sequence[str], writable: Sequence[str]) -> None:
    """Raise :class:`PathRefused` when a file that runs (a script the arguments name) lies where a plugin writes.

    Another plugin (or this one) could rewrite it between two starts: the
    digest would notice, but the plugin must not run from there at all.
    """
    roots = [os.path.realpath(w) for w in writable]
    for program in programs:
        for root in roots:
            if is_inside(program, root):
                raise PathRefused(program, f"is code that runs, inside {root}, which a plugin can write")


def _content_digest(path: str) -> str:
    """``"sha256:<hex>"`` of the file at ``path`` (blocking; reads it whole)."""
    with open(path, "rb") as fh:
        return "sha256:" + hashlib.file_digest(fh, "sha256").hexdigest()


def _runs_as_content(real: str, root: str) -> bool:
    """True when the approval must pin ``real``'s bytes: it lies in the plugin folder, or is a ``#!`` script."""
    if is_inside(real, root):
        return True
    with open(real, "rb") as fh:
        return fh.read(2) == b"#!"


def expand_home(word: str, home: str | None, data: str | None = None) -> str | None:
    """``word`` with a leading ``~``, ``${HOME}`` / ``$HOME`` or ``${data}`` expanded; ``None`` if it names no path.

    ``"~/docs"`` -> ``"/home/ada/docs"``; ``"${data}/memory.jsonl"`` -> the
    plugin's data folder's file (with ``data``); ``"/srv/x"`` stays;
    ``"stdio"`` or ``"~bob/x"`` (another user's home) -> ``None``. Users write
    ``~`` in the configs they already have. Arguments and env values are
    passed expanded (:func:`expand_argument`, :func:`resolve_launch`), so what
    the launch shows is what runs.
    """
    for prefix, base in (("~", home), ("${HOME}", home), ("$HOME", home), ("${data}", data)):
        if base and (word == prefix or word.startswith(prefix + "/")):
            return os.path.normpath(base + word[len(prefix) :])
    return word if os.path.isabs(word) else None


def expand_argument(arg: str, home: str | None, data: str | None = None) -> str:
    """``arg`` as the program gets it: a leading ``~``, ``${HOME}``, ``$HOME`` or ``${data}`` expanded, in the
    argument or in the value of ``--opt=value``; anything else (``~bob/x``, text) unchanged.

    ``"~/docs"`` -> ``"/home/ada/docs"``; ``"--root=~/docs"`` -> ``"--root=/home/ada/docs"``.
    """
    if arg.startswith("-") and "=" in arg:
        option, value = arg.split("=", 1)
        return f"{option}={expand_argument(value, home, data)}"
    if arg.startswith(("~", "$")):
        expanded = expand_home(arg, home, data)
        if expanded is not None:
            return expanded
    return arg


def _named_paths(
    args: Sequence[str], root: str, env: Mapping[str, str], home: str | None, data: str | None = None
) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    """What the arguments and the manifest's env values name: ``(files, folders)``.

    ``folders`` items are ``(label, path as named, real path)``.
    See :attr:`Launch.files` / :attr:`Launch.folders`. An argument names a
    path when it is absolute, starts with ``~`` (expanded with ``home``), or
    is relative to the plugin folder (the working folder) and exists there;
    ``--opt=value`` is read for its value too. An env value names a path when
    it is absolute or starts with ``~``; it is listed as ``$NAME``. Files
    inside the plugin folder are hashed; anything else is pinned by its real
    path (a path that does not exist yet too: where it would be created).
    """
    files: list[tuple[str, str]] = []
    folders: list[tuple[str, str, str]] = []
    named: list[tuple[str, str]] = []
    for arg in args:
        candidates = [arg]
        if arg.startswith("-") and "=" in arg:
            candidates.append(arg.split("=", 1)[1])
        for word in candidates:
            if not word or word.startswith("-"):
                continue
            path = expand_home(word, home)
            if path is None:
                path = os.path.join(root, word)
                if not os.path.lexists(path):
                    continue
            named.append((word, path))
    named += [(f"${name}", path) for name, value in env.items() if (path := expand_home(value, home, data)) is not None]
    for label, path in named:
        real = os.path.realpath(path)
        if os.path.isfile(real) and is_inside(real, root):
            try:
                files.append((real, _content_digest(real)))
                continue
            except OSError:
                pass
        if os.path.isfile(real) and not label.startswith("$") and _is_script(real):
            # A script outside the plugin folder runs too: its content is pinned like one inside.
            with contextlib.suppress(OSError):
                files.append((real, _content_digest(real)))
        folders.append((label, path, real))
    return files, folders


def _declared_paths(
    needs: tuple[Sequence[str], Sequence[str]], home: str | None, data_dir: str | None, source: str = "sandbox"
) -> list[tuple[str, str, str]]:
    """The manifest's ``sandbox.read`` / ``sandbox.write`` (``source="grant"``: the parent's folder
    grants) as ``(label, path, real path)``.

    ``~`` and ``${HOME}`` expand to ``home``, ``${data}`` to the plugin's data
    folder; a path that cannot be expanded (no home, no data folder) is left
    out. Labels are ``sandbox.read[0]``, ``sandbox.write[1]`` ...
    """
    found: list[tuple[str, str, str]] = []
    for kind, paths in zip(("read", "write"), needs, strict=True):
        for index, raw in enumerate(paths):
            path = expand_home(raw, home, data_dir)
            if path is not None:
                found.append((f"{source}.{kind}[{index}]", path, os.path.realpath(path)))
    return found


_SCRIPT_SUFFIXES = (".py", ".pyz", ".js", ".mjs", ".cjs", ".ts", ".mts", ".rb", ".pl", ".php", ".lua", ".jar")


def _is_script(real: str) -> bool:
    """True for a program file: a known script suffix, or a ``#!`` first line."""
    if real.endswith(_SCRIPT_SUFFIXES):
        return True
    try:
        with open(real, "rb") as fh:
            return fh.read(2) == b"#!"
    except OSError:
        return False


def named_grants(folders: Sequence[tuple[str, str, str]]) -> tuple[list[str], list[str]]:
    """The Landlock grants that named paths bring: ``(read, write)``, paths as named (not yet resolved).

    ``folders``: ``(label, path as named, real path)`` from the arguments
    and env values. A folder is readable and writable: the folders a
    filesystem server serves, a data folder. A file named by an argument is
    readable with its folder (a script and the modules beside it); a file
    named by an env value (label ``$NAME``: ``KUBECONFIG=~/.kube/config``)
    is readable only, like a data file an argument names (issue 25: an env
    value naming a file is a grant, read-only unless declared writable with
    ``sandbox.write`` or a ``plugins/grant`` write); one that does not exist
    yet makes its folder readable and writable, so the server can create it
    (``MEMORY_FILE_PATH``). A missing path an argument names grants nothing
    (a folder the user has to create). The paths come back
    as named so that :func:`sandbox.policy.landlock_rules` checks every link
    on the way; every grant is shown in ``launch.folders`` and covered by the
    digest.
    """
    read: list[str] = []
    write: list[str] = []
    for label, path, real in folders:
        if os.path.isdir(real):
            write.append(path)
        elif os.path.isfile(real):
            read.append(path)
            folder = os.path.dirname(path)
            # A script's modules sit beside it (python /home/ada/proj/server.py); a data file's
            # folder is not granted (/etc/hostname must not open all of /etc), nor an env value's.
            if not label.startswith("$") and _is_script(real) and os.path.dirname(folder) != "/":
                read.append(folder)
        elif label.startswith("$") and os.path.isdir(os.path.dirname(real)):
            # A file an env value names that does not exist yet (MEMORY_FILE_PATH): its folder, to create it.
            # A missing folder an argument names is no grant: the user has to create it.
            write.append(os.path.dirname(path))
    return list(dict.fromkeys(read)), list(dict.fromkeys(write))
