"""The environment variable families a manifest's ``env`` may not set, and the members it may.

The tables :mod:`sandbox.environment` applies: :data:`ENV_FAMILIES` (the
families refused, each with why and what to do instead), :data:`ALLOWED_ENV`
(members that only tune output or encoding) and :data:`LOADER_VARS` (the old
exact-name list, each name still refused). The policy functions that read
them (``env_family``, ``is_loader_var``, ``build_environment``) live in
:mod:`sandbox.environment`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ALLOWED_ENV", "ENV_FAMILIES", "LOADER_VARS", "EnvFamily"]

# The class these tables guard against (issue 9, class 6): a variable in the
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
# name is harmless; :attr:`~sandbox.environment.EnvPolicy.allow_loader_vars` is the escape hatch
# for an embedder that trusts its manifests.
#
# Where the line runs (issue 25, under-granting item 6): a family is refused
# because its variables steer a *runtime of the launch chain* (the dynamic
# loader, the C library, a shell, an interpreter, the package tool that
# fetches the plugin's code, git and ssh beneath it, a compiler a package
# build runs) or name a program or module a library starts or loads. A
# variable that only configures the plugin's own code passes, whatever its
# value names: ``KUBECONFIG``, ``AWS_CONFIG_FILE``, ``DOCKER_HOST``,
# ``PUPPETEER_SKIP_DOWNLOAD``, ``XDG_*``. Its value is shown in the approval
# and covered by the digest, and a file or folder it names is granted like
# one an argument names (read-only unless declared writable;
# :func:`sandbox.launch.named_grants`), never the whole of ``HOME``.


#: What a user can do about a refused variable: it comes from the manifest's ``env``, or from the ``env`` of
#: the config entry ``plugins/import`` turned into one; no setting of hostd re-admits it.
REMOVE_ADVICE = (
    "remove it from the server's env (the env of its entry in the config you import, or of its manifest) "
    "and install it again"
)


@dataclass(frozen=True)
class EnvFamily:
    """A group of environment variables that can change what code runs.

    ``label``: short name used in errors, e.g. ``"git"``. ``pattern``: the
    family as shown to a user, e.g. ``"GIT_*"``. ``prefixes`` / ``names``:
    upper-case prefixes and exact names the family covers (matched against
    the canonical name, see :func:`~sandbox.environment.canonical_env_name`). ``why``: how a member
    makes a runtime run other code (a clause completing "which ..."). ``advice``:
    what the plugin author should do instead.
    """

    label: str
    pattern: str
    prefixes: tuple[str, ...]
    names: frozenset[str]
    why: str
    advice: str = REMOVE_ADVICE


def _family(
    label: str, pattern: str, prefixes: tuple[str, ...], names: tuple[str, ...], why: str, *, advice: str = ""
) -> EnvFamily:
    return EnvFamily(label, pattern, prefixes, frozenset(names), why, advice or REMOVE_ADVICE)


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
        advice=REMOVE_ADVICE + ": hostd passes the host's PATH (absolute entries only); "
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
        "network proxy",
        "HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY (any case)",
        (),
        ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY"),
        "route the download of the plugin's packages through a host the manifest chooses",
        advice=REMOVE_ADVICE + ": hostd passes the user's proxy with --pass-proxy-env",
    ),
    _family(
        "TLS trust",
        "SSL_CERT_FILE, SSL_CERT_DIR, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, NODE_EXTRA_CA_CERTS, OPENSSL_*",
        ("OPENSSL_", "SSL_CERT"),
        ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "NODE_TLS_REJECT_UNAUTHORIZED"),
        "make downloads trust another certificate authority (or load OpenSSL engines), so a package "
        "can come from someone other than its registry",
        advice=REMOVE_ADVICE + ": hostd passes the user's own CA settings",
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
        "CC, CXX, CFLAGS, LDFLAGS, MAKEFLAGS, CMAKE_*, CCACHE_*, PKG_CONFIG_* ...",
        ("CMAKE_", "CCACHE_", "DISTCC_", "CGO_", "PKG_CONFIG"),
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
        "HOME, TMPDIR, TMP, TEMP, XDG_CACHE_HOME",
        (),
        ("HOME", "TMPDIR", "TMP", "TEMP", "TEMPDIR", "XDG_CACHE_HOME"),
        "replace the private folders hostd creates and checks for the plugin: its TMPDIR, its package "
        "caches, and its HOME, where a runtime reads its startup files (.npmrc, .gitconfig, Python's user "
        "site-packages)",
        advice=REMOVE_ADVICE + ": hostd gives every plugin a private TMPDIR and a private HOME whose writes "
        'persist (sandbox/README.md, "A private HOME")',
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
        "CHROME_PATH, PUPPETEER_EXECUTABLE_PATH, *_RSH, SVN_*, CVS_*, PKCS11_*, ODBC*, SASL_PATH ...",
        ("SVN_", "CVS_", "PKCS11_", "ODBC"),
        (
            "CHROME_PATH",
            "CHROME_BIN",
            "FIREFOX_BIN",
            "RSYNC_RSH",
            "CVS_RSH",
            "TERMINAL",
            "SHELL",
            "OPENSC_CONF",
            "SASL_PATH",
            "HGEDITOR",
            "CLOUDSDK_PYTHON",
            "GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES",
            "PUPPETEER_EXECUTABLE_PATH",
            "PUPPETEER_BROWSER_REVISION",
            "PUPPETEER_DOWNLOAD_BASE_URL",
            "PUPPETEER_DOWNLOAD_HOST",
            "PUPPETEER_DOWNLOAD_PATH",
            "PUPPETEER_CACHE_DIR",
            "PLAYWRIGHT_BROWSERS_PATH",
            "PLAYWRIGHT_DOWNLOAD_HOST",
            "PLAYWRIGHT_CHROMIUM_EXECUTABLE_PATH",
        ),
        "name a program or module a library starts or loads (a browser or where it is downloaded from, a "
        "remote shell, a PKCS#11 or SASL module, the Python the cloud SDK runs)",
    ),
)

#: Members of refused families that only tune output, encoding, prompting or
#: cache politeness and never change what code runs (canonical spelling; see
#: :func:`~sandbox.environment.canonical_env_name`). Each was checked against the runtime's docs:
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
