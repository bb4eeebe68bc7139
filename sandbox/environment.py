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
the manifest's ``env`` by *family* (:data:`ENV_FAMILIES`: ``LD_*``,
``GIT_*``, ``npm_config_*`` in any case, ``UV_*``, ``PYTHON*``, ``PATH``,
``HOME``, the proxy and CA group ...), except a documented allowlist of
members that only tune output or encoding (:data:`ALLOWED_ENV`); a manifest
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

import os
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "ALLOWED_ENV",
    "ALLOWLIST",
    "CA_VARS",
    "DEFAULT_PATH",
    "ENV_FAMILIES",
    "LOADER_VARS",
    "PROXY_VARS",
    "SECRET_NAME_PARTS",
    "EnvFamily",
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

# The class this module guards against (issue 9, class 6): a variable in the
# manifest's ``env`` that changes *what code a runtime loads or executes*, so
# the approved launch (command, args, executable) no longer tells the user
# what runs. Members are not just "loader" variables: a runtime also runs
# other code when told to read another config (git's ``GIT_CONFIG_COUNT`` /
# ``GIT_CONFIG_KEY_n`` / ``GIT_CONFIG_VALUE_n`` with ``core.fsmonitor``, an
# ``.npmrc`` under a redirected ``HOME``), to fetch its code from elsewhere
# (``UV_INDEX_URL``, ``npm_config_registry``, a proxy plus a trusted CA, a
# redirected cache), to pick another interpreter (``UV_PYTHON``,
# ``JAVA_HOME``, ``PATH``) or to run a helper command (``GIT_SSH``,
# ``GIT_PROXY_COMMAND``, ``npm_config_script_shell``, ``EDITOR``, ``CC``).
# Exact-name lists miss the relatives of every name on them, so the policy is
# by *family*: whole prefixes of a runtime's namespace are refused, and a
# short allowlist (:data:`ALLOWED_ENV`) re-admits members that only tune
# output, encoding or politeness. Names are compared case-insensitively with
# ``-`` read as ``_`` (npm reads ``npm_config_*`` in any case and maps ``_``
# to ``-``; for runtimes that read one exact spelling, refusing the other
# spellings costs nothing). The families are not a proof that every other
# name is harmless; :attr:`EnvPolicy.allow_loader_vars` is the escape hatch
# for an embedder that trusts its manifests.


@dataclass(frozen=True)
class EnvFamily:
    """A group of environment variables that can change what code runs.

    ``label``: short name used in errors, e.g. ``"git"``. ``pattern``: the
    family as shown to a user, e.g. ``"GIT_*"``. ``prefixes`` / ``names``:
    upper-case prefixes and exact names the family covers (matched against
    the canonical name, see :func:`canonical_env_name`). ``why``: how a member
    makes a runtime run other code (a clause completing "which ..."). ``advice``:
    what the plugin author should do instead.
    """

    label: str
    pattern: str
    prefixes: tuple[str, ...]
    names: frozenset[str]
    why: str
    advice: str = "remove it from the manifest's env"


def _family(
    label: str, pattern: str, prefixes: tuple[str, ...], names: tuple[str, ...], why: str, *, advice: str = ""
) -> EnvFamily:
    return EnvFamily(label, pattern, prefixes, frozenset(names), why, advice or "remove it from the manifest's env")


#: Families refused in a manifest's ``env`` (first match wins; the allowlist
#: :data:`ALLOWED_ENV` is consulted before any of them).
ENV_FAMILIES: tuple[EnvFamily, ...] = (
    _family(
        "dynamic loader",
        "LD_*, DYLD_*",
        ("LD_", "DYLD_", "_RLD"),
        (),
        "make the dynamic loader preload or search other shared libraries",
    ),
    _family(
        "glibc",
        "GCONV_PATH, GLIBC_TUNABLES, LOCPATH, NLSPATH, MALLOC_* ...",
        ("MALLOC_", "GLIBC_"),
        ("GCONV_PATH", "LOCPATH", "NLSPATH", "HOSTALIASES", "RESOLV_HOST_CONF", "LOCALDOMAIN", "RES_OPTIONS"),
        "make the C library load other conversion modules, locales or tunables",
    ),
    _family(
        "exported bash function",
        "BASH_FUNC_*",
        ("BASH_FUNC_",),
        (),
        "define shell functions that every bash the plugin starts runs instead of commands",
    ),
    _family(
        "shell startup",
        "BASH_ENV, ENV, SHELLOPTS, PS4, PROMPT_COMMAND, IFS, SHELL ...",
        ("BASH_", "ZDOTDIR"),
        (
            "ENV",
            "SHELL",
            "SHELLOPTS",
            "BASHOPTS",
            "PS0",
            "PS1",
            "PS2",
            "PS3",
            "PS4",
            "PROMPT_COMMAND",
            "IFS",
            "CDPATH",
            "FPATH",
            "GLOBIGNORE",
            "POSIXLY_CORRECT",
        ),
        "make a shell source a file, run a prompt command or parse commands differently",
    ),
    _family(
        "executable search path",
        "PATH",
        (),
        ("PATH",),
        "decide which program every bare command the plugin runs (sh, node, git, python) resolves to",
        advice="remove it from the manifest's env: hostd passes the host's PATH (absolute entries only); "
        "ship your own programs in the plugin folder and name them with a path command such as ./bin/server",
    ),
    _family(
        "editor, pager and browser hook",
        "EDITOR, VISUAL, PAGER, BROWSER, LESSOPEN, MANPAGER, VIMINIT ...",
        ("SYSTEMD_", "SUDO_"),
        (
            "LESS",
            "LESSOPEN",
            "LESSCLOSE",
            "LESSEDIT",
            "LESSKEY",
            "LESSKEYIN",
            "LESSKEY_SYSTEM",
            "LESSKEYIN_SYSTEM",
            "EDITOR",
            "VISUAL",
            "PAGER",
            "BROWSER",
            "MANPAGER",
            "MANOPT",
            "MANPATH",
            "VIMINIT",
            "GVIMINIT",
            "EXINIT",
            "MYVIMRC",
            "MYGVIMRC",
            "VIMRUNTIME",
            "TERMINFO",
            "TERMINFO_DIRS",
            "TERMCAP",
        ),
        "name a command that tools run to edit, page or open things",
    ),
    _family(
        "config redirection",
        "HOME, XDG_*, CURL_HOME, WGETRC, INPUTRC, PKG_CONFIG_* ...",
        ("XDG_", "PKG_CONFIG", "KRB5", "DOCKER_", "CONTAINERS_", "GNUPG", "CLOUDSDK_"),
        (
            "HOME",
            "CURL_HOME",
            "WGETRC",
            "INPUTRC",
            "NETRC",
            "KUBECONFIG",
            "AWS_CONFIG_FILE",
            "AWS_SHARED_CREDENTIALS_FILE",
            "GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES",
            "SASL_PATH",
            "HGRCPATH",
            "HGEDITOR",
        ),
        "make tools read another configuration (a .gitconfig, .npmrc, pip.conf or credential helper "
        "that runs commands, a cache holding other packages)",
        advice="remove it from the manifest's env: the plugin gets the user's HOME; a folder the plugin "
        "must write is granted with extra_write_paths",
    ),
    _family(
        "network proxy",
        "HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY (any case)",
        (),
        ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY"),
        "route the download of the plugin's packages through a host the manifest chooses",
        advice="remove it from the manifest's env: hostd passes the user's proxy with --pass-proxy-env",
    ),
    _family(
        "TLS trust",
        "SSL_CERT_FILE, SSL_CERT_DIR, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, NODE_EXTRA_CA_CERTS, OPENSSL_*",
        ("OPENSSL_", "SSL_CERT"),
        ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "NODE_TLS_REJECT_UNAUTHORIZED"),
        "make downloads trust another certificate authority (or load OpenSSL engines), so a package "
        "can come from someone other than its registry",
        advice="remove it from the manifest's env: hostd passes the user's own CA settings",
    ),
    _family(
        "git",
        "GIT_*",
        ("GIT_",),
        (),
        "configure git (GIT_CONFIG_COUNT/KEY_n/VALUE_n, GIT_CONFIG_GLOBAL), its helpers (GIT_SSH, "
        "GIT_PROXY_COMMAND, GIT_ASKPASS, GIT_EDITOR) and where it finds its programs (GIT_EXEC_PATH)",
    ),
    _family(
        "ssh",
        "SSH_*",
        ("SSH_",),
        (),
        "run an askpass program or reach the user's SSH agent",
    ),
    _family(
        "node and npm",
        "NODE_*, npm_config_* / NPM_* (any case), YARN_*, PNPM_*, COREPACK_*, BUN_*, DENO_*, ELECTRON_*",
        ("NODE_", "NPM_", "YARN_", "PNPM_", "COREPACK_", "BUN_", "DENO_", "ELECTRON_", "NPX_"),
        (),
        "set interpreter options, module paths, the registry, the cache, the script shell or "
        "which package manager version runs",
    ),
    _family(
        "runtime version manager",
        "VOLTA_*, FNM_*, ASDF_*, MISE_*, PYENV_*, RBENV_*, NODENV_*",
        ("VOLTA_", "FNM_", "ASDF_", "MISE_", "PYENV", "RBENV_", "NODENV_", "NVM_"),
        (),
        "make a runtime shim start another interpreter version",
    ),
    _family(
        "python",
        "PYTHON*, _PYTHON*, PIP_*, UV_*, VIRTUAL_ENV, CONDA_* ...",
        ("PYTHON", "_PYTHON", "__PYVENV", "PIP_", "PIPX_", "UV_", "CONDA_", "POETRY_", "PDM_", "HATCH_", "SETUPTOOLS_"),
        ("VIRTUAL_ENV",),
        "set the import path, startup files, warnings filters (which import modules), the interpreter "
        "uv picks (UV_PYTHON), the package index (UV_INDEX_URL, PIP_INDEX_URL) or the cache",
    ),
    _family(
        "build toolchain",
        "CC, CXX, CFLAGS, LDFLAGS, MAKEFLAGS, CMAKE_*, CCACHE_* ...",
        ("CMAKE_", "CCACHE_", "DISTCC_", "CGO_"),
        (
            "CC",
            "CXX",
            "CPP",
            "LD",
            "AR",
            "AS",
            "NM",
            "RANLIB",
            "STRIP",
            "OBJCOPY",
            "OBJDUMP",
            "CFLAGS",
            "CXXFLAGS",
            "CPPFLAGS",
            "LDFLAGS",
            "LDLIBS",
            "MAKE",
            "MAKEFLAGS",
            "MFLAGS",
            "GNUMAKEFLAGS",
            "MAKEFILES",
            "CPATH",
            "C_INCLUDE_PATH",
            "CPLUS_INCLUDE_PATH",
            "LIBRARY_PATH",
            "COMPILER_PATH",
            "GCC_EXEC_PREFIX",
        ),
        "choose the compiler and flags a package build (node-gyp, an sdist) runs",
    ),
    _family(
        "rust",
        "CARGO_*, RUSTC*, RUSTUP_*, RUSTFLAGS, RUSTDOC*",
        ("CARGO_", "RUSTC", "RUSTUP_", "RUSTDOC"),
        ("RUSTFLAGS",),
        "choose the toolchain, a compiler wrapper or a registry",
    ),
    _family(
        "go",
        "GOFLAGS, GOPROXY, GOTOOLCHAIN, GOROOT, GOPATH ...",
        (),
        (
            "GOFLAGS",
            "GOPROXY",
            "GONOPROXY",
            "GOSUMDB",
            "GONOSUMDB",
            "GOPRIVATE",
            "GOINSECURE",
            "GOTOOLCHAIN",
            "GOROOT",
            "GOPATH",
            "GOBIN",
            "GOENV",
            "GOWORK",
            "GOMODCACHE",
            "GOCACHE",
            "GOEXPERIMENT",
            "GODEBUG",
            "GOVCS",
        ),
        "choose the module proxy, the toolchain or build flags",
    ),
    _family(
        "jvm",
        "JAVA_*, JDK_*, _JAVA_OPTIONS, CLASSPATH, MAVEN_*, GRADLE_* ...",
        ("JAVA_", "JDK_", "_JAVA_", "MAVEN_", "M2_", "GRADLE_", "SBT_", "ANT_", "JRUBY_"),
        ("CLASSPATH",),
        "add agents, options or class paths, or choose the JVM",
    ),
    _family(
        "dotnet",
        "DOTNET_*, CORECLR_*, COREHOST_*, COMPLUS_*",
        ("DOTNET_", "CORECLR_", "COREHOST_", "COMPLUS_"),
        (),
        "add startup hooks or profilers, or choose the runtime",
    ),
    _family(
        "perl",
        "PERL*",
        ("PERL",),
        (),
        "add modules or options to every perl",
    ),
    _family(
        "ruby",
        "RUBY*, GEM_*, BUNDLE_*, BUNDLER_*",
        ("RUBY", "GEM_", "BUNDLE_", "BUNDLER_"),
        (),
        "add options, load paths or a Gemfile",
    ),
    _family(
        "lua, tcl, php and r",
        "LUA_*, TCL*, TK_LIBRARY, PHPRC, PHP_*, R_*",
        ("LUA_", "TCL", "PHP_", "R_"),
        ("TK_LIBRARY", "PHPRC"),
        "run an init chunk or add library paths",
    ),
    _family(
        "desktop module path",
        "QT_*, GTK_*, GIO_*, GST_*, VK_*, LIBGL_* ...",
        ("QT_", "GTK_", "GIO_", "GST_", "GDK_", "VK_", "LIBGL_", "__EGL_", "__GLX_", "MESA_"),
        ("GI_TYPELIB_PATH",),
        "make a toolkit load plugin modules from another folder",
    ),
    _family(
        "host-set folders",
        "TMPDIR, TMP, TEMP",
        (),
        ("TMPDIR", "TMP", "TEMP", "TEMPDIR"),
        "replace the private temporary folder hostd creates, checks and empties for the plugin",
        advice="remove it from the manifest's env: hostd gives every plugin a private TMPDIR",
    ),
    _family(
        "install prefix",
        "PREFIX, DESTDIR, npm's PREFIX/etc/npmrc ...",
        (),
        ("PREFIX", "DESTDIR", "INSTALL_PREFIX"),
        "move the prefix a package tool reads its configuration from (npm reads PREFIX/etc/npmrc, whose "
        "script-shell it runs), to a folder the plugin writes",
    ),
    _family(
        "other runtimes' load paths",
        "ERL_*, JULIA_*, GUILE_*, OCAML*, R_LIBS*, PYTEST_*, DJANGO_SETTINGS_MODULE, IPYTHONDIR, MPLBACKEND ...",
        ("ERL_", "JULIA_", "GUILE_", "OCAML", "CAML_", "PYTEST_", "COQ", "RACKET", "SBCL_", "NIX_", "ANSIBLE_"),
        ("DJANGO_SETTINGS_MODULE", "IPYTHONDIR", "MPLBACKEND", "MPLCONFIGDIR", "JUPYTER_PATH", "JUPYTER_CONFIG_DIR"),
        "make a runtime or framework load modules, plugins or settings code from another place",
    ),
    _family(
        "programs run on a tool's behalf",
        "PUPPETEER_*, CHROME_PATH, *_RSH, SVN_*, CVS_*, PKCS11_*, ODBC* ...",
        ("PUPPETEER_", "PLAYWRIGHT_", "SVN_", "CVS_", "PKCS11_", "ODBC", "SUDO_", "DBUS_"),
        ("CHROME_PATH", "CHROME_BIN", "RSYNC_RSH", "CVS_RSH", "FIREFOX_BIN", "OPENSC_CONF", "TERMINAL", "SHELL"),
        "name a program or module a library starts or loads (a browser, a remote shell, a PKCS#11 module)",
    ),
)

#: Members of refused families that only tune output, encoding, prompting or
#: cache politeness and never change what code runs (canonical spelling; see
#: :func:`canonical_env_name`). Each was checked against the runtime's docs:
#: none names a file, folder, URL, program, module or interpreter.
ALLOWED_ENV: frozenset[str] = frozenset(
    {
        # git: commit identity; refuse to prompt on a terminal
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_TERMINAL_PROMPT",
        # python: buffering, encoding, hashing, bytecode files, tracebacks; two
        # that only remove places code is imported from
        "PYTHONUNBUFFERED",
        "PYTHONUTF8",
        "PYTHONIOENCODING",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONHASHSEED",
        "PYTHONFAULTHANDLER",
        "PYTHONNOUSERSITE",
        "PYTHONSAFEPATH",
        "PIP_NO_INPUT",
        "PIP_DISABLE_PIP_VERSION_CHECK",
        # uv: progress bars, offline use of the user's own cache, the platform's
        # certificate store, bytecode compilation; libuv's (Node) thread count
        "UV_NO_PROGRESS",
        "UV_OFFLINE",
        "UV_SYSTEM_CERTS",
        "UV_NATIVE_TLS",
        "UV_COMPILE_BYTECODE",
        "UV_THREADPOOL_SIZE",
        # node and npm: mode flag, warnings, colours; npm's cache preference
        # against the same registry, notices and log level
        "NODE_ENV",
        "NODE_NO_WARNINGS",
        "NODE_DISABLE_COLORS",
        "NPM_CONFIG_PREFER_OFFLINE",
        "NPM_CONFIG_PREFER_ONLINE",
        "NPM_CONFIG_OFFLINE",
        "NPM_CONFIG_UPDATE_NOTIFIER",
        "NPM_CONFIG_FUND",
        "NPM_CONFIG_AUDIT",
        "NPM_CONFIG_LOGLEVEL",
        "NPM_CONFIG_PROGRESS",
        "NPM_CONFIG_COLOR",
    }
)

#: Kept for callers of the old exact-name list: every name it held, each still
#: refused (now through its family; see :data:`ENV_FAMILIES`).
LOADER_VARS: frozenset[str] = frozenset(
    {
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
        "NODE_OPTIONS",
        "NODE_PATH",
        "NODE_REPL_EXTERNAL_MODULE",
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
        "IFS",
        "CDPATH",
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
        "GCONV_PATH",
        "GLIBC_TUNABLES",
        "HOSTALIASES",
        "LOCPATH",
        "MALLOC_CHECK_",
        "NLSPATH",
        "RESOLV_HOST_CONF",
        "GIT_SSH_COMMAND",
        "GIT_EXEC_PATH",
        "GIT_CONFIG_GLOBAL",
    }
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
    :data:`ENV_FAMILIES`), ``PATH`` and ``HOME`` among them; refused
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

    ``None`` for names on :data:`ALLOWED_ENV` and for names in no family of
    :data:`ENV_FAMILIES`. Case-insensitive (see :func:`canonical_env_name`):
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

    That is, ``name`` is in a family of :data:`ENV_FAMILIES` and not on
    :data:`ALLOWED_ENV` (case-insensitive). ``is_loader_var("LD_AUDIT")``,
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
    identity names on :data:`ALLOWED_ENV` (``GIT_AUTHOR_NAME`` holds
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
    members configure git (...); remove it from the manifest's env (allowed
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
