"""The child environment: an allowlist, never a copy of the host's.

Theory of operation. A plugin sees only what :func:`build_environment`
hands it:

1. a small allowlist taken from the host (``PATH`` with only absolute
   entries, ``HOME``, ``USER``, ``LOGNAME``, ``LANG``, ``LC_*``, ``TZ``);
2. ``TMPDIR`` pointing at the plugin's own temporary folder, and
   ``PYTHONUNBUFFERED=1`` / ``PYTHONUTF8=1`` (a stdio MCP server must not
   block-buffer its replies);
3. the user's TLS trust settings (:data:`CA_VARS`: ``SSL_CERT_FILE``,
   ``NODE_EXTRA_CA_CERTS`` ...) always; the proxy group only when
   :attr:`EnvPolicy.pass_proxy` is set; and any names the user listed in
   :attr:`EnvPolicy.extra_passthrough`;
4. the manifest's ``env``, applied last so it wins.

Variables that change what code a runtime loads or executes are refused in
the manifest's ``env`` by *family* (:data:`~sandbox.env_families.ENV_FAMILIES`: ``LD_*``,
``GIT_*``, ``npm_config_*`` in any case, ``UV_*``, ``PYTHON*``, ``PATH``,
``HOME``, the proxy and CA group ...), except a documented allowlist of
members that only tune output or encoding (:data:`~sandbox.env_families.ALLOWED_ENV`); a manifest
may set them only under :attr:`EnvPolicy.allow_loader_vars`. The error
names the variable, its family and what to do. ``PATH`` is refused on
purpose: it decides which executable every subprocess of the plugin runs
(``npx`` starts ``node`` and ``sh``, ``uvx`` a ``python``), while the
approval shows only the one executable hostd resolves; hostd passes the
host's ``PATH`` (absolute entries, plus the login shell's). Values
starting with ``()`` (exported bash functions, the Shellshock shape) are
dropped wherever they come from. :func:`is_secret_name` tells which names
hold secrets, so an approval can show every other value.

Where this differs from the mcp SDK's ``get_default_environment``: the SDK
inherits a similar allowlist but lets the manifest set anything; here the
loader group is refused by default because a manifest is untrusted input.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess

from sandbox.env_families import ALLOWED_ENV, ENV_FAMILIES, EnvFamily

__all__ = [
    "ALLOWLIST",
    "CA_VARS",
    "DEFAULT_PATH",
    "PROXY_VARS",
    "SECRET_NAME_PARTS",
    "EnvPolicy",
    "EnvironmentPolicyError",
    "build_environment",
    "canonical_env_name",
    "env_family",
    "env_policy_message",
    "is_loader_var",
    "is_secret_name",
    "trim_path",
]

#: Names copied from the host environment when present (plus every ``LC_*``).
ALLOWLIST: frozenset[str] = frozenset({"PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ"})

#: The user's TLS trust settings: always passed from the host (they are paths, not secrets, and a
#: network with a TLS-inspecting proxy needs them: without them ``uvx`` fails with ``UnknownIssuer``).
#: The files they name become read rules (:func:`host_trust_paths`).
CA_VARS: tuple[str, ...] = (
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
)

#: The proxy group; passed from the host only with ``pass_proxy=True`` (a proxy URL may carry credentials).
PROXY_VARS: tuple[str, ...] = (
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
    "ALL_PROXY",
    "all_proxy",
    *CA_VARS,
)

#: Parts of a variable name that mark its value as a secret (matched as
#: substrings of the upper-cased name). The same words hostd/wire/redact.py masks
#: in plugin output (api_key, access_key, secret, token, password, passwd,
#: client_secret), widened for names: a false positive only hides a value
#: from the approval (the digest still covers it).
SECRET_NAME_PARTS: tuple[str, ...] = (
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "PASS",
    "PWD",
    "KEY",
    "CREDENTIAL",
    "CREDS",
    "AUTH",
    "COOKIE",
    "SESSION",
    "PRIVATE",
    "CERT",
    "SIGNING",
    "SALT",
    "BEARER",
    "JWT",
    "DSN",
    "WEBHOOK",
    "CONNECTION_STRING",
    "CONN_STR",
)


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
    variables of the refused families (:func:`is_loader_var`,
    :data:`~sandbox.env_families.ENV_FAMILIES`), ``PATH`` and ``HOME`` among them; refused
    otherwise. The escape hatch for an embedder that trusts its manifests.
    ``extra_passthrough``: further names copied from the host when present
    (the user's documented, configurable passthrough list).
    """

    pass_proxy: bool = False
    allow_loader_vars: bool = False
    extra_passthrough: frozenset[str] = frozenset()


def canonical_env_name(name: str) -> str:
    """The spelling families and the allowlist are matched against: upper case, ``-`` as ``_``.

    ``"npm_config_Script-Shell"`` gives ``"NPM_CONFIG_SCRIPT_SHELL"``.
    """
    return name.upper().replace("-", "_")


def env_family(name: str) -> EnvFamily | None:
    """The refused family ``name`` belongs to, or ``None`` if a manifest may set it.

    ``None`` for names on :data:`~sandbox.env_families.ALLOWED_ENV` and for names in no family of
    :data:`~sandbox.env_families.ENV_FAMILIES`. Case-insensitive (see :func:`canonical_env_name`):
    ``env_family("NPM_CONFIG_SCRIPT_SHELL").label == "node and npm"``,
    ``env_family("GIT_AUTHOR_NAME") is None``, ``env_family("API_BASE") is None``.
    """
    canonical = canonical_env_name(name)
    if canonical in ALLOWED_ENV:
        return None
    for family in ENV_FAMILIES:
        if canonical in family.names or canonical.startswith(family.prefixes):
            return family
    return None


def is_loader_var(name: str) -> bool:
    """True when ``name`` can make a runtime load or execute other code.

    That is, ``name`` is in a family of :data:`~sandbox.env_families.ENV_FAMILIES` and not on
    :data:`~sandbox.env_families.ALLOWED_ENV` (case-insensitive). ``is_loader_var("LD_AUDIT")``,
    ``is_loader_var("GIT_CONFIG_COUNT")`` and
    ``is_loader_var("NPM_CONFIG_SCRIPT_SHELL")`` are true;
    ``is_loader_var("LDAP_URI")`` and ``is_loader_var("PYTHONUNBUFFERED")``
    are false.
    """
    return env_family(name) is not None


def is_secret_name(name: str) -> bool:
    """True when the value of variable ``name`` should be treated as a secret.

    A name is secret when its upper-cased form contains one of
    :data:`SECRET_NAME_PARTS` (``OPENAI_API_KEY``, ``GITHUB_TOKEN``,
    ``DB_PASSWORD``, ``SENTRY_DSN``, ``SESSION_COOKIE`` ...), except the
    identity names on :data:`~sandbox.env_families.ALLOWED_ENV` (``GIT_AUTHOR_NAME`` holds
    ``AUTH`` but is not a secret). Substring matching errs towards "secret":
    a false positive only hides a value (the approval digest still covers
    it); a false negative would show it. ``is_secret_name("API_BASE")`` and
    ``is_secret_name("NODE_ENV")`` are false.
    """
    canonical = canonical_env_name(name)
    if canonical in ALLOWED_ENV:
        return False
    return any(part in canonical for part in SECRET_NAME_PARTS)


def env_policy_message(name: str, family: EnvFamily, origin: str = "manifest env sets") -> str:
    """The refusal text for ``name`` in ``family``: the variable, its family, why, and what to do.

    E.g. ``"manifest env sets GIT_CONFIG_COUNT, a variable of the git family
    (GIT_*), which can make a runtime run code the launch does not show: its
    members configure git (...); remove it from the server's env (... (allowed
    in this family: GIT_AUTHOR_EMAIL, ...)"``.
    """
    allowed = sorted(n for n in ALLOWED_ENV if n in family.names or n.startswith(family.prefixes))
    text = (
        f"{origin} {name}, a variable of the {family.label} family ({family.pattern}), "
        f"which can make a runtime run code the launch does not show: its members {family.why}; "
        f"{family.advice}"
    )
    if allowed:
        text += f" (allowed in this family: {', '.join(allowed)})"
    return text


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
    the TLS trust group (:data:`CA_VARS`), the proxy group when
    ``policy.pass_proxy``, ``policy.extra_passthrough``
    names, then ``manifest_env`` over all of them. Any value starting with
    ``"()"`` is dropped.

    Raises :class:`EnvironmentPolicyError` (naming the variable, its family
    and what to do; see :func:`env_policy_message`) when the manifest sets a
    variable of a refused family (:func:`env_family`) and
    ``policy.allow_loader_vars`` is false (the first such name in the
    manifest's order), when ``extra_passthrough`` names one under the same condition,
    or when a name is empty / contains ``=`` or NUL, or a value contains NUL.
    """
    env: dict[str, str] = {}
    for name, value in host_env.items():
        if name in ALLOWLIST or name.startswith("LC_"):
            env[name] = value
    for name in PROXY_VARS if policy.pass_proxy else CA_VARS:
        if name in host_env:
            env[name] = host_env[name]
    for name in sorted(policy.extra_passthrough):
        family = env_family(name)
        if family is not None and not policy.allow_loader_vars:
            raise EnvironmentPolicyError(
                name, env_policy_message(name, family, "extra_passthrough names") + "; or set allow_loader_vars=True"
            )
        if name in host_env:
            env[name] = host_env[name]

    env["PATH"] = trim_path(env.get("PATH", "")) or DEFAULT_PATH
    env["TMPDIR"] = tmpdir
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONUTF8"] = "1"

    for name, value in manifest_env.items():
        _check_name_value(name, value, "manifest")
        family = env_family(name)
        if family is not None and not policy.allow_loader_vars:
            raise EnvironmentPolicyError(name, env_policy_message(name, family))
        env[name] = value

    for name, value in list(env.items()):
        if _is_function_value(value) or "\0" in value or "\0" in name or "=" in name or not name:
            del env[name]
    return env


_PATH_MARK = "__HOSTD_LOGIN_PATH__"


def login_shell_path(
    shell: str | None = None, timeout: float = 3.0, env: Mapping[str, str] | None = None
) -> str | None:
    """The ``PATH`` the user's login shell sets up, or ``None`` (blocking; bounded by ``timeout`` s).

    Desktop launchers (the Dock, a ``.desktop`` file, systemd) start apps with
    a minimal ``PATH`` that lacks nvm, volta, Homebrew or ``~/.local/bin``.
    This runs ``$SHELL -l -c`` once (no ``-i``: nothing interactive, stdin is
    ``/dev/null``) and reads the ``PATH`` it prints between markers, so a
    chatty profile cannot confuse it. Only absolute entries are kept.
    Failure, a time-out or a missing shell give ``None``. The caller caches
    the result (hostd computes it once at start; ``hostd serve
    --no-login-path`` turns it off). ``env``: the shell's environment (default: this process's).

    The shell runs in a process group of its own, which ends with its answer or its time-out (the group is
    killed, so what a profile started in the background goes too), and at this process's exit at the latest
    (:func:`end_login_shells`, an ``atexit`` function): a hostd asked to exit while a slow profile still runs
    leaves nothing behind it, as it leaves no plugin (before, the shell ran on, orphaned, and a short-lived hostd
    often left one).
    """
    import subprocess  # noqa: PLC0415  (only this helper runs a process)

    program = shell or (os.environ if env is None else env).get("SHELL") or "/bin/sh"
    if not os.path.isabs(program) or not os.access(program, os.X_OK):
        return None
    script = f'printf "%s%s%s" "{_PATH_MARK}" "$PATH" "{_PATH_MARK}"'
    try:
        shell_process = subprocess.Popen(
            [program, "-l", "-c", script],
            env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            process_group=0,
        )
    except OSError:
        return None
    _watch_login_shell(shell_process)
    try:
        out, _ = shell_process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    finally:
        _end_login_shell(shell_process)
    parts = out.decode("utf-8", "replace").split(_PATH_MARK)
    if len(parts) < 3:
        return None
    return trim_path(parts[-2]) or None


#: Login shells still running (:func:`login_shell_path`), ended at exit by :func:`end_login_shells`.
_LOGIN_SHELLS: set[subprocess.Popen[bytes]] = set()


def _watch_login_shell(shell_process: subprocess.Popen[bytes]) -> None:
    """Remember a running login shell until :func:`_end_login_shell` (or :func:`end_login_shells` at exit)."""
    _LOGIN_SHELLS.add(shell_process)


def _end_login_shell(shell_process: subprocess.Popen[bytes]) -> None:
    """Forget ``shell_process``; when it has not been reaped (a time-out, or this process exiting while it runs),
    kill its process group (what its profile started in the background too) and reap it (bounded: SIGKILL).
    A reaped shell's group is left alone: its id may belong to a new process by now."""
    import signal  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    _LOGIN_SHELLS.discard(shell_process)
    if shell_process.returncode is None:  # not reaped: its pid, and so its group's id, is still its own
        try:
            os.killpg(shell_process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass  # the group is gone
        try:
            shell_process.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            pass  # not reapable within the bound: init reaps it
    if shell_process.stdout is not None:
        shell_process.stdout.close()


def end_login_shells() -> None:
    """End every login shell :func:`login_shell_path` still waits for (an ``atexit`` function: a hostd
    exiting while a profile runs). Safe to call at any time; blocking, at most ~2 s per shell."""
    for shell_process in list(_LOGIN_SHELLS):
        _end_login_shell(shell_process)


atexit.register(end_login_shells)  # a no-op for a process that never ran one


def merge_paths(first: str, second: str | None) -> str:
    """``first`` followed by the entries of ``second`` it lacks (``PATH`` syntax)."""
    entries = [e for e in first.split(os.pathsep) if e]
    for entry in (second or "").split(os.pathsep):
        if entry and entry not in entries:
            entries.append(entry)
    return os.pathsep.join(entries)
