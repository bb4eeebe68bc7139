"""Call-time grants: a file or folder a ``tools/call`` names reaches the plugin -- with the user's consent.

Before a call is sent, :func:`reach` finds the local paths its arguments name (:mod:`hostd.host.file_args`)
that the running plugin's Landlock rules do not cover. A parent that declared ``capabilities.grants`` at
``initialize`` is asked with one hostd->parent request, ``grants/request {plugin, tool, paths, reason}``,
answered ``{grant: "no" | "once" | "always"}``. On ``once`` (kept in memory until hostd exits) or ``always``
(recorded in the state as ``callGrants``), the grant becomes a rule of the plugin's isolation plan -- never of
the launch the digest covers, so it voids no approval -- and, since Landlock rules are fixed when the process
is executed, the plugin is restarted and waited for (ready) before the call is delivered. On ``no``, with a
parent that does not answer grants, or a path the sandbox refuses (hostd's own state, the whole home...), the
call fails with ``ACCESS_NOT_GRANTED`` carrying the grant that would allow it (``plugins/grantPath`` params and
the ``hostctl allow`` command) -- before the server sees the call.

``plugins/grantPath`` and ``plugins/revokePath`` make and take back the same grants by hand.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Protocol

import trio

from hostd.control import models as p
from hostd.control.core import InitializeOptions, RequestContext
from hostd.host.file_args import NamedPath, may_name_paths, named_paths, reachable, with_real_home
from hostd.host.records import InstalledPlugin
from hostd.mcp.tools import RegisteredTool
from hostd.wire.errors import ErrorKind, HostError
from sandbox.launch import Launch, LaunchError

#: How long the parent (a person) has to answer ``grants/request``, in seconds; a cancel of the call ends it
#: at once.
CONSENT_TIMEOUT = 600.0


class GrantHost(Protocol):
    """What the call-time grants need of the host (:class:`hostd.host.service.Host` is one)."""

    @property
    def options(self) -> InitializeOptions: ...

    def change(self) -> AbstractAsyncContextManager[None]:
        """Apply the body's changes to memory and the state document together, or to neither."""
        ...

    def _plugin(self, plugin_id: str) -> InstalledPlugin:
        """The installed plugin ``plugin_id``; raises :class:`HostError` ``PLUGIN_NOT_FOUND``."""
        ...

    async def resolve(self, plugin: InstalledPlugin) -> Launch:
        """Resolve ``plugin``'s launch; raises :class:`LaunchError`."""
        ...

    async def restart_running(self, plugin: InstalledPlugin) -> None:
        """Restart the enabled, running ``plugin`` with its launch resolved now and wait until it is ready."""
        ...

    def info(self, plugin: InstalledPlugin) -> dict[str, Any]:
        """``PluginInfo`` as sent on the wire."""
        ...


def _confined(launch: Launch | None) -> bool:
    """Whether Landlock file rules apply to ``launch`` (else the plugin reaches what the user reaches:
    nothing to grant). A field test, cheap enough for every tools/call."""
    return launch is not None and launch.plan is not None and "landlock-fs" in launch.isolation


def _rules(launch: Launch | None) -> dict[str, list[str]] | None:
    """The Landlock path lists ``launch`` runs under; ``None`` when no Landlock file rules apply."""
    if launch is None or launch.plan is None or not _confined(launch):
        return None
    return launch.plan.rule_lists()


def _grant_advice(plugin_id: str, items: Sequence[NamedPath]) -> dict[str, Any]:
    """``data`` members naming the exact grants: ``grants`` (``plugins/grantPath`` params), ``commands``."""
    grants = [{"id": plugin_id, "path": item.grant, "access": item.access} for item in items]
    commands = [
        f"hostctl allow {plugin_id} {shlex.quote(item.grant)}" + (" --write" if item.access == "write" else "")
        for item in items
    ]
    return {"grants": grants, "commands": commands}


def _not_granted(plugin_id: str, tool: str, items: Sequence[NamedPath], reason: str, why: str) -> HostError:
    listed = ", ".join(f"{item.grant} ({item.access})" for item in items)
    advice = _grant_advice(plugin_id, items)
    return HostError(
        ErrorKind.ACCESS_NOT_GRANTED,
        f"{tool} names what plugin {plugin_id} may not reach: {listed}; {why}. To allow it: "
        + "; ".join(advice["commands"]),
        plugin=plugin_id,
        tool=tool,
        reason=reason,
        paths=[_requested(item) for item in items],
        **advice,
    )


def _requested(item: NamedPath) -> dict[str, Any]:
    return p.RequestedPath(path=item.grant, access=item.access, argument=item.pointer, value=item.value).wire()


async def _ask(host: GrantHost, plugin_id: str, tool: str, items: Sequence[NamedPath]) -> str:
    """The parent's answer to ``grants/request`` (``no``, ``once``, ``always``); ``ACCESS_NOT_GRANTED``
    (``no-capability``) when it does not answer grants; ``PARENT_REQUEST_FAILED`` for an error or silence."""
    request_parent = host.options.request_parent
    if "grants" not in host.options.client_capabilities or request_parent is None:
        raise _not_granted(
            plugin_id, tool, items, "no-capability", "the parent does not answer grants/request (capabilities.grants)"
        )
    listed = ", ".join(f"{item.grant} ({'read-write' if item.access == 'write' else 'read'})" for item in items)
    params = p.GrantRequestParams(
        plugin=plugin_id,
        tool=tool,
        paths=[p.RequestedPath.model_validate(_requested(item)) for item in items],
        reason=f"the tool {tool} was called with {listed}, which plugin {plugin_id} may not reach",
    )
    answer = await request_parent("grants/request", params.wire(), CONSENT_TIMEOUT)
    try:
        return p.GrantAnswer.model_validate(answer).grant
    except ValueError:
        raise HostError(
            ErrorKind.PARENT_REQUEST_FAILED,
            'the parent\'s grants/request result is not {grant: "no" | "once" | "always"}',
            plugin=plugin_id,
            tool=tool,
        ) from None


async def reach(host: GrantHost, plugin: InstalledPlugin, tool: RegisteredTool, arguments: Mapping[str, Any]) -> bool:
    """Make every local path ``arguments`` name reachable by the running ``plugin`` before ``tool`` is called.

    Returns whether the plugin was restarted (the caller looks the tool up again). Raises
    ``ACCESS_NOT_GRANTED`` (``data.reason``: ``declined``, ``no-capability``, ``refused``; ``data.grants``,
    ``data.commands``), ``PARENT_REQUEST_FAILED``, or what a restart raises (``PLUGIN_START_FAILED``...).
    Grants already recorded but not yet in force (``plugins/grantPath`` while running) are applied without
    asking. One decision at a time per plugin; a cancel while the parent is asked grants nothing.
    """
    plugin_id = plugin.manifest.id
    # The hot path of every tools/call: field tests and a walk of the arguments' strings, no rule lists
    # built and no stat, unless a string is written as a local path.
    if not _confined(plugin.supervisor.running_launch):
        return False
    home = str(Path.home())
    if not may_name_paths(arguments, home):
        return False
    items = await trio.to_thread.run_sync(named_paths, arguments, tool.input_schema, tool.annotations, home)
    if not items:
        return False
    async with plugin.grant_lock:
        rules = _rules(plugin.supervisor.running_launch)
        needed = [item for item in items if rules is not None and not reachable(item, rules)]
        if not needed:
            return False
        granted = plugin.path_grants()
        new = [item for item in needed if not _covered(item, granted)]
        if new:
            answer = await _ask(host, plugin_id, tool.name, new)
            if answer == "no":
                raise _not_granted(plugin_id, tool.name, new, "declined", "the user declined")
            await _record(host, plugin, new, always=answer == "always", tool=tool.name)
        await host.restart_running(plugin)
        # What the sandbox dropped on the way (a rule it would not make) must not reach the server as EACCES.
        rules = _rules(plugin.supervisor.running_launch)
        missing = [item for item in needed if rules is not None and not reachable(item, rules)]
        if missing:
            raise _not_granted(plugin_id, tool.name, missing, "refused", "the sandbox did not apply the grant")
        return True


def users_home(plugin: InstalledPlugin, arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` as the running ``plugin`` must receive them: when its ``HOME`` is a private view
    (:attr:`sandbox.launch.Launch.home`), every ``~`` path the user wrote made absolute under the user's
    real ``HOME`` (:func:`hostd.host.file_args.with_real_home`), so a server that expands ``~`` itself
    reaches the user's file, not one of its view. Unchanged otherwise (the plugin's ``HOME`` is the user's).
    A field test and a walk of the strings; no file system access.
    """
    launch = plugin.supervisor.running_launch
    if launch is None or launch.home is None:
        return arguments
    rewritten, _ = with_real_home(arguments, launch.home.real)
    return rewritten


def _covered(item: NamedPath, granted: Mapping[str, str]) -> bool:
    """Whether a call-time grant already gives ``item`` its access (applied at the next start)."""
    return any(
        (item.grant == path or item.grant.startswith(path.rstrip("/") + "/"))
        and (access == "write" or item.access == "read")
        for path, access in granted.items()
    )


async def _record(
    host: GrantHost, plugin: InstalledPlugin, items: Sequence[NamedPath], *, always: bool, tool: str
) -> None:
    """Add the grants (``always``: to the state document), check them with a resolution; a path the sandbox
    refuses is taken back and answered ``ACCESS_NOT_GRANTED`` (``refused``)."""
    target = "call_grants" if always else "once_grants"
    before = dict(getattr(plugin, target))
    after = dict(before)
    for item in items:
        if after.get(item.grant) != "write":
            after[item.grant] = item.access
    async with host.change():
        setattr(plugin, target, after)
    try:
        await host.resolve(plugin)
    except LaunchError as exc:
        if exc.kind != "PATH_REFUSED":
            return  # the launch's own problem (a command gone...): the restart reports it, the grant stays
        async with host.change():
            setattr(plugin, target, before)
        try:
            await host.resolve(plugin)
        except LaunchError:
            pass  # the launch's own problem, shown in launch.error as before
        raise _not_granted(plugin.manifest.id, tool, items, "refused", f"the sandbox refuses it: {exc}") from None


def _expanded(plugin_id: str, raw: str) -> str:
    """``raw`` (absolute or ``~/``) as a normalised absolute path; ``INVALID_PARAMS`` otherwise."""
    path = os.path.expanduser(raw) if raw == "~" or raw.startswith("~/") else raw
    if not os.path.isabs(path) or "\0" in path:
        raise HostError(
            ErrorKind.INVALID_PARAMS, f"plugin {plugin_id}: {raw!r} is not an absolute or ~ path", plugin=plugin_id
        )
    return os.path.normpath(path)


async def grant_path(host: GrantHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``plugins/grantPath {id, path, access?}`` -> ``PluginInfo``: record a call-time grant for good.

    ``path`` must exist (``INVALID_PARAMS``); it is granted as its real path. A path the sandbox refuses
    (hostd's state folder, the whole home, a link a plugin can write) is ``ACCESS_NOT_GRANTED``
    (``refused``) and nothing is recorded. A running plugin gets it at its next start (or at the next call
    that names it, which restarts it).
    """
    args = p.parse_params(p.GrantPathParams, params)
    plugin = host._plugin(args.id)
    path = _expanded(args.id, args.path)
    if not os.path.exists(path):
        raise HostError(ErrorKind.INVALID_PARAMS, f"plugin {args.id}: {args.path} does not exist", plugin=args.id)
    real = os.path.realpath(path)
    item = NamedPath(pointer="", value=args.path, path=real, access=args.access, grant=real)
    async with plugin.grant_lock:
        await _record(host, plugin, [item], always=True, tool="plugins/grantPath")
    return host.info(plugin)


async def revoke_path(host: GrantHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``plugins/revokePath {id, path}`` -> ``PluginInfo``: take back a call-time grant, ``once`` and ``always``.

    ``INVALID_PARAMS`` when no call-time grant has that path. A running plugin whose rules hold it is
    restarted (Landlock rules cannot be narrowed in a running process) and waited for.
    """
    args = p.parse_params(p.RevokePathParams, params)
    plugin = host._plugin(args.id)
    path = _expanded(args.id, args.path)
    keys = {path, os.path.realpath(path)}
    async with plugin.grant_lock:
        if not keys & (set(plugin.call_grants) | set(plugin.once_grants)):
            raise HostError(
                ErrorKind.INVALID_PARAMS,
                f"plugin {args.id} has no call-time grant of {args.path}",
                plugin=args.id,
                granted=sorted(plugin.path_grants()),
            )
        async with host.change():
            plugin.call_grants = {k: v for k, v in plugin.call_grants.items() if k not in keys}
            plugin.once_grants = {k: v for k, v in plugin.once_grants.items() if k not in keys}
        running = plugin.supervisor.running_launch
        in_force = (
            running is not None
            and running.plan is not None
            and bool(keys & set(running.plan.extra_read + running.plan.extra_write))
        )
        if in_force and plugin.enabled and plugin.supervisor.state.value == "ready":
            await host.restart_running(plugin)
        else:
            try:
                await host.resolve(plugin)
            except LaunchError:
                pass  # shown in launch.error, as at install
    return host.info(plugin)
