"""One visible capability set: everything a plugin may reach, in one value (``PluginInfo.launch.capabilities``).

The class (issue 25, "One visible capability set"): what a plugin may do was spread over ``launch.folders``
(argument → path, with no access nor reason), ``launch.envKeys``, ``launch.isolation``, ``networkPorts``,
``userConfig`` and ``launch.prepare``, and call-time grants were nowhere -- so the approval showed no single
list a person could read. :func:`capability_set` gathers them: folders and files (path, ``read`` or
``write``, and why: ``argument``, ``env``, ``declared``, ``parent grant``, ``call-time grant``, ``private
home``), network,
environment names, secrets (name and channel) and prepared packages. ``hostctl approve`` renders it.

A pure function of an :class:`~hostd.host.records.InstalledPlugin` and its resolved launch (memory only).
"""

from __future__ import annotations

from hostd.control import models as p
from hostd.host.records import InstalledPlugin
from hostd.install.manifest_fields import REMOTE_TRANSPORTS
from hostd.storage import secrets as secrets_
from sandbox.launch import Launch


def _why(label: str) -> str:
    """Why a ``launch.folders`` label is there: ``env`` (``$NAME``), ``declared`` (``sandbox.*``), ``parent
    grant`` (``grant.*``), else ``argument``."""
    if label.startswith("$"):
        return "env"
    if label.startswith("sandbox."):
        return "declared"
    if label.startswith("grant."):
        return "parent grant"
    return "argument"


def _inside(path: str, rules: list[str]) -> bool:
    return any(path == rule or path.startswith(rule.rstrip("/") + "/") for rule in rules)


def _folders(plugin: InstalledPlugin, launch: Launch) -> list[p.FolderCapability]:
    """The files and folders, each with the access the Landlock rules give it (what is enforced, not what
    was asked); without Landlock file rules the plugin reaches what the user does: ``write``."""
    plan = launch.plan
    rules = plan.rule_lists() if plan is not None and "landlock-fs" in launch.isolation else None
    found: list[p.FolderCapability] = []

    def access_of(path: str) -> str:
        if rules is None or _inside(path, rules.get("write", [])):
            return "write"
        return "read"

    for label, real in launch.folders:
        found.append(
            p.FolderCapability.model_validate(
                {"path": real, "access": access_of(real), "why": _why(label), "source": label}
            )
        )
    if launch.home is not None:  # the private HOME (sandbox/home_view.py): the plugin's own writes under ~
        found.append(
            p.FolderCapability.model_validate(
                {"path": launch.home.path, "access": "write", "why": "private home", "source": "HOME"}
            )
        )
    for path, access in sorted(plugin.path_grants().items()):
        source = "always" if path in plugin.call_grants else "once"
        found.append(
            p.FolderCapability.model_validate(
                {"path": path, "access": access, "why": "call-time grant", "source": source}
            )
        )
    return found


def _network(plugin: InstalledPlugin, launch: Launch) -> p.NetworkCapability:
    hosts = list(launch.network[0]) if launch.network is not None else None
    if "netproxy" in launch.isolation:
        return p.NetworkCapability(access="hosts", tcpPorts=[], hosts=hosts, filtering="enforced")
    if hosts is not None and launch.command in REMOTE_TRANSPORTS:  # a remote server: hostd makes every request
        return p.NetworkCapability(access="hosts", tcpPorts=[], hosts=hosts, filtering=REMOTE_FILTERING)
    # Issue 26: where the allowlist cannot be enforced, the level's network stays, and the launch says so.
    filtering = None if hosts is None else _unfiltered_why(plugin)
    policy = plugin.policy
    if policy is None or policy.network == "allow":
        return p.NetworkCapability(access="all", tcpPorts=[], hosts=hosts, filtering=filtering)
    ports = sorted(launch.plan.tcp_ports) if launch.plan is not None else []
    return p.NetworkCapability(access="ports" if ports else "none", tcpPorts=ports, hosts=hosts, filtering=filtering)


#: ``launch.capabilities.network.filtering`` of a remote server with an allowlist (hostd/mcp/transport/http.py).
REMOTE_FILTERING = "enforced by hostd: every request for this remote server goes to these hosts only"


def _unfiltered_why(plugin: InstalledPlugin) -> str:
    """Why a plugin's allowlist is not enforced (``netproxy`` was not planned: sandbox/policy.py ``_proxied``)."""
    if plugin.policy is not None and not plugin.policy.landlock:
        return "not enforced: --sandbox basic applies no network isolation"
    return (
        "not enforced: this kernel offers no unprivileged network and pid namespaces (hostd doctor), so the "
        "plugin has the sandbox level's network"
    )


def _secrets(plugin: InstalledPlugin) -> list[p.SecretCapability]:
    backend = plugin.manifest.backend
    sensitive = {name for name, option in plugin.manifest.user_config.items() if option.sensitive}
    channels: dict[str, set[str]] = {}
    for channel, words in (
        ("argv", backend.args),
        ("env", backend.env.values()),
        ("header", [*backend.headers.values(), *([backend.oauth.client_secret] if backend.oauth else [])]),
    ):
        for name in secrets_.references([w for w in words if w], channel="value"):
            channels.setdefault(name, set()).add(channel)
        for name in secrets_.references([w for w in words if w], channel="file"):
            channels.setdefault(name, set()).add("file")  # a 0600 file; argv or env holds only its path
        for name in sensitive:
            if any("${user_config." + name + "}" in w for w in words if w):
                channels.setdefault(name, set()).add(channel)
            if any("${user_config." + name + ":file}" in w for w in words if w):
                channels.setdefault(name, set()).add("file")
    return [
        p.SecretCapability.model_validate({"name": name, "channel": channel, "set": name in plugin.secret_names})
        for name in sorted(channels)
        for channel in sorted(channels[name])
    ]


def _packages(plugin: InstalledPlugin) -> list[p.PackageCapability]:
    prepared, package = plugin.prepared, plugin.package
    if prepared is not None:
        return [
            p.PackageCapability(manager=prepared.manager, name=name, version=version, registry=prepared.registry)
            for name, version in sorted(prepared.resolved.items())
        ]
    if package is not None:
        return [
            p.PackageCapability(manager=package.manager, name=spec, version=None, registry=None)
            for spec in package.packages
        ]
    return []


def capability_set(plugin: InstalledPlugin, launch: Launch) -> p.CapabilitySet:
    """``launch.capabilities``: what ``plugin`` may reach when it runs ``launch`` (and its call-time grants).

    ``folders``: each path with ``access`` (``read`` / ``write``), ``why`` and ``source`` (the argument,
    ``$NAME``, the grant's label, or ``once`` / ``always``). ``network``: ``all``, ``none`` or ``ports``
    (``tcpPorts``). ``env``: the environment's names. ``secrets``: each ``${secret:NAME}`` or sensitive
    setting by the channel it travels in (``env``, ``argv``, ``header``, ``file``). ``packages``: what was prepared
    (exact versions, registry), or the specs still to prepare.
    """
    return p.CapabilitySet(
        folders=_folders(plugin, launch),
        network=_network(plugin, launch),
        env=launch.env_keys,
        secrets=_secrets(plugin),
        packages=_packages(plugin),
    )
