"""The child environment: an allowlist, never a copy of the host's.

Theory of operation. A plugin sees only what :func:`build_environment`
hands it:

1. a small allowlist taken from the host (``PATH`` with only absolute
   entries, ``HOME``, ``USER``, ``LOGNAME``, ``LANG``, ``LC_*``, ``TZ``);
2. ``TMPDIR`` pointing at the plugin's own temporary folder, and
   ``PYTHONUNBUFFERED=1`` / ``PYTHONUTF8=1`` (a stdio MCP server must not
   block-buffer its replies);
3. the proxy/CA group, only when :attr:`EnvPolicy.pass_proxy` is set, and any
   names the user listed in :attr:`EnvPolicy.extra_passthrough`;
4. the manifest's ``env``, applied last so it wins.

Loader-injection variables (``LD_PRELOAD``, ``PYTHONPATH``, ``NODE_OPTIONS``,
``BASH_ENV`` ...) make an interpreter run code the plugin's author did not
ship; a manifest may set them only under :attr:`EnvPolicy.allow_loader_vars`.
Values starting with ``()`` (exported bash functions, the Shellshock shape)
are dropped wherever they come from.

Where this differs from the mcp SDK's ``get_default_environment``: the SDK
inherits a similar allowlist but lets the manifest set anything; here the
loader group is refused by default because a manifest is untrusted input.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "ALLOWLIST",
    "DEFAULT_PATH",
    "LOADER_VARS",
    "PROXY_VARS",
    "EnvPolicy",
    "EnvironmentPolicyError",
    "build_environment",
    "is_loader_var",
    "trim_path",
]

#: Names copied from the host environment when present (plus every ``LC_*``).
ALLOWLIST: frozenset[str] = frozenset({"PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ"})

#: The proxy and CA group; passed from the host only with ``pass_proxy=True``.
PROXY_VARS: tuple[str, ...] = (
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
    "ALL_PROXY",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
)

#: Exact names that make a loader or interpreter run foreign code or load
#: foreign libraries. ``LD_*``, ``DYLD_*`` and ``BASH_FUNC_*`` are matched by
#: prefix (see :func:`is_loader_var`).
LOADER_VARS: frozenset[str] = frozenset(
    {
        # Python
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PYTHONINSPECT",
        "PYTHONUSERBASE",
        "PYTHONEXECUTABLE",
        "PYTHONBREAKPOINT",
        "PYTHONWARNINGS",
        "PYTHONPLATLIBDIR",
        "PYTHONPYCACHEPREFIX",
        # Node
        "NODE_OPTIONS",
        "NODE_PATH",
        "NODE_REPL_EXTERNAL_MODULE",
        # shells
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
        "IFS",
        "CDPATH",
        # Perl, Ruby, JVM, Lua, Tcl
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "PERL5DB",
        "RUBYOPT",
        "RUBYLIB",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "CLASSPATH",
        "LUA_INIT",
        "LUA_PATH",
        "LUA_CPATH",
        "TCLLIBPATH",
        # glibc
        "GCONV_PATH",
        "GLIBC_TUNABLES",
        "HOSTALIASES",
        "LOCPATH",
        "MALLOC_CHECK_",
        "NLSPATH",
        "RESOLV_HOST_CONF",
        # git (a plugin shelling out to git would run these)
        "GIT_SSH_COMMAND",
        "GIT_EXEC_PATH",
        "GIT_CONFIG_GLOBAL",
    }
)

_LOADER_PREFIXES: tuple[str, ...] = ("LD_", "DYLD_", "BASH_FUNC_")

#: PATH used when the host has none (or none with an absolute entry).
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


class EnvironmentPolicyError(ValueError):
    """The manifest's environment breaks the policy.

    ``variable`` is the offending name; the message names it too, e.g.
    ``"manifest env sets LD_PRELOAD, a loader-injection variable; ..."``.
    """

    def __init__(self, variable: str, message: str) -> None:
        super().__init__(message)
        self.variable = variable


@dataclass(frozen=True)
class EnvPolicy:
    """What may reach a plugin's environment besides the fixed allowlist.

    ``pass_proxy``: pass the proxy/CA group (:data:`PROXY_VARS`) from the host.
    ``allow_loader_vars``: let the manifest (and ``extra_passthrough``) set
    loader-injection variables (:func:`is_loader_var`); refused otherwise.
    ``extra_passthrough``: further names copied from the host when present
    (the user's documented, configurable passthrough list).
    """

    pass_proxy: bool = False
    allow_loader_vars: bool = False
    extra_passthrough: frozenset[str] = frozenset()


def is_loader_var(name: str) -> bool:
    """True when ``name`` can make a loader or interpreter run foreign code.

    Exact names from :data:`LOADER_VARS`, plus the prefixes ``LD_``, ``DYLD_``
    and ``BASH_FUNC_``. Case-sensitive, as the loaders are.
    """
    return name in LOADER_VARS or name.startswith(_LOADER_PREFIXES)


def trim_path(value: str) -> str:
    """Keep only absolute, distinct entries of a ``PATH`` value, in order.

    Empty and relative entries (which mean "the current directory" and would
    make lookup depend on ``cwd``) are dropped. ``"bin::/usr/bin:/usr/bin"``
    gives ``"/usr/bin"``. May return ``""``.
    """
    seen: list[str] = []
    for entry in value.split(":"):
        if entry.startswith("/") and entry not in seen:
            seen.append(entry)
    return ":".join(seen)


def _is_function_value(value: str) -> bool:
    return value.startswith("()")


def _check_name_value(name: str, value: str, origin: str) -> None:
    if not name or "=" in name or "\0" in name:
        raise EnvironmentPolicyError(name, f"{origin} env has an invalid variable name {name!r}")
    if "\0" in value:
        raise EnvironmentPolicyError(name, f"{origin} env value of {name} contains a NUL byte")


def build_environment(
    host_env: Mapping[str, str],
    manifest_env: Mapping[str, str],
    policy: EnvPolicy,
    *,
    tmpdir: str,
) -> dict[str, str]:
    """Build the complete environment of a plugin process.

    ``host_env`` is hostd's own environment (normally ``os.environ``);
    ``manifest_env`` the manifest's ``env`` table; ``tmpdir`` an absolute
    folder for ``TMPDIR``. Returns a new ``dict`` (name -> value) holding
    only: the allowlist (``PATH`` trimmed by :func:`trim_path`, falling back
    to :data:`DEFAULT_PATH`; ``HOME``, ``USER``, ``LOGNAME``, ``LANG``,
    ``LC_*``, ``TZ``), ``TMPDIR``, ``PYTHONUNBUFFERED=1``, ``PYTHONUTF8=1``,
    the proxy group when ``policy.pass_proxy``, ``policy.extra_passthrough``
    names, then ``manifest_env`` over all of them. Any value starting with
    ``"()"`` is dropped.

    Raises :class:`EnvironmentPolicyError` (naming the variable) when the
    manifest sets a loader-injection variable and ``policy.allow_loader_vars``
    is false, when ``extra_passthrough`` names one under the same condition,
    or when a name is empty / contains ``=`` or NUL, or a value contains NUL.
    """
    env: dict[str, str] = {}
    for name, value in host_env.items():
        if name in ALLOWLIST or name.startswith("LC_"):
            env[name] = value
    if policy.pass_proxy:
        for name in PROXY_VARS:
            if name in host_env:
                env[name] = host_env[name]
    for name in sorted(policy.extra_passthrough):
        if is_loader_var(name) and not policy.allow_loader_vars:
            raise EnvironmentPolicyError(
                name,
                f"extra_passthrough names {name}, a loader-injection variable; "
                "it passes only with allow_loader_vars=True",
            )
        if name in host_env:
            env[name] = host_env[name]

    env["PATH"] = trim_path(env.get("PATH", "")) or DEFAULT_PATH
    env["TMPDIR"] = tmpdir
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONUTF8"] = "1"

    for name, value in manifest_env.items():
        _check_name_value(name, value, "manifest")
        if is_loader_var(name) and not policy.allow_loader_vars:
            raise EnvironmentPolicyError(
                name,
                f"manifest env sets {name}, a loader-injection variable; "
                "it is accepted only when the policy allows loader variables",
            )
        env[name] = value

    for name, value in list(env.items()):
        if _is_function_value(value) or "\0" in value or "\0" in name or "=" in name or not name:
            del env[name]
    return env


_PATH_MARK = "__HOSTD_LOGIN_PATH__"


def login_shell_path(shell: str | None = None, timeout: float = 3.0) -> str | None:
    """The ``PATH`` the user's login shell sets up, or ``None`` (blocking; bounded by ``timeout`` s).

    Desktop launchers (the Dock, a ``.desktop`` file, systemd) start apps with
    a minimal ``PATH`` that lacks nvm, volta, Homebrew or ``~/.local/bin``.
    This runs ``$SHELL -l -c`` once (no ``-i``: nothing interactive, stdin is
    ``/dev/null``) and reads the ``PATH`` it prints between markers, so a
    chatty profile cannot confuse it. Only absolute entries are kept.
    Failure, a time-out or a missing shell give ``None``. The caller caches
    the result (hostd computes it once at start; ``hostd serve
    --no-login-path`` turns it off).
    """
    import subprocess  # noqa: PLC0415  (only this helper runs a process)

    program = shell or os.environ.get("SHELL") or "/bin/sh"
    if not os.path.isabs(program) or not os.access(program, os.X_OK):
        return None
    script = f'printf "%s%s%s" "{_PATH_MARK}" "$PATH" "{_PATH_MARK}"'
    try:
        done = subprocess.run(
            [program, "-l", "-c", script],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = done.stdout.decode("utf-8", "replace").split(_PATH_MARK)
    if len(parts) < 3:
        return None
    return trim_path(parts[-2]) or None


def merge_paths(first: str, second: str | None) -> str:
    """``first`` followed by the entries of ``second`` it lacks (``PATH`` syntax)."""
    entries = [e for e in first.split(os.pathsep) if e]
    for entry in (second or "").split(os.pathsep):
        if entry and entry not in entries:
            entries.append(entry)
    return os.pathsep.join(entries)
