"""The environment policy: an allowlist, the proxy group on demand, loader variables refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import yaml

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from sandbox.env_families import ALLOWED_ENV, LOADER_VARS
from sandbox.environment import (
    DEFAULT_PATH,
    EnvironmentPolicyError,
    EnvPolicy,
    build_environment,
    env_family,
    env_policy_message,
    is_loader_var,
    is_secret_name,
    login_shell_path,
    merge_paths,
    trim_path,
)
from tests.conftest import MakePlugin, spawn_hostd
from tests.waiting import until

HOST = {
    "PATH": "/usr/local/bin:relative/bin::/usr/bin:.:/bin:/usr/bin",
    "HOME": "/home/ada",
    "USER": "ada",
    "LOGNAME": "ada",
    "LANG": "en_GB.UTF-8",
    "LC_ALL": "en_GB.UTF-8",
    "LC_TIME": "C",
    "TZ": "Europe/London",
    "OPENAI_API_KEY": "sk-planted",
    "AWS_SECRET_ACCESS_KEY": "aws-planted",
    "HOSTD_TEST_SECRET": "hostd-planted",
    "HTTPS_PROXY": "http://proxy.invalid:3128",
    "https_proxy": "http://proxy.invalid:3128",
    "NO_PROXY": "localhost",
    "SSL_CERT_FILE": "/etc/ssl/custom.pem",
    "NODE_EXTRA_CA_CERTS": "/etc/ssl/extra.pem",
    "LD_PRELOAD": "/tmp/evil.so",
    "PYTHONPATH": "/tmp/evil",
    "TERM": "xterm",
    "SHELL": "/bin/bash",
    "BASH_FUNC_x%%": "() { echo pwned; }",
}

BASE = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/home/ada",
    "USER": "ada",
    "LOGNAME": "ada",
    "LANG": "en_GB.UTF-8",
    "LC_ALL": "en_GB.UTF-8",
    "LC_TIME": "C",
    "TZ": "Europe/London",
    "TMPDIR": "/tmp/plugin-x",
    "PYTHONUNBUFFERED": "1",
    "PYTHONUTF8": "1",
    # The user's TLS trust settings always pass (paths, not secrets; a TLS-inspecting proxy needs them).
    "SSL_CERT_FILE": "/etc/ssl/custom.pem",
    "NODE_EXTRA_CA_CERTS": "/etc/ssl/extra.pem",
}


def build(manifest: dict[str, str] | None = None, policy: EnvPolicy | None = None) -> dict[str, str]:
    return build_environment(HOST, manifest or {}, policy or EnvPolicy(), tmpdir="/tmp/plugin-x")


def test_default_policy_gives_exactly_the_allowlist() -> None:
    assert build() == BASE


def test_planted_secrets_and_proxy_are_absent_by_default() -> None:
    env = build()
    for name in (
        "OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "HOSTD_TEST_SECRET",
        "HTTPS_PROXY",
        "https_proxy",
    ):
        assert name not in env
    assert "sk-planted" not in env.values()


def test_proxy_group_passes_with_pass_proxy() -> None:
    env = build(policy=EnvPolicy(pass_proxy=True))
    assert env == {
        **BASE,
        "HTTPS_PROXY": "http://proxy.invalid:3128",
        "https_proxy": "http://proxy.invalid:3128",
        "NO_PROXY": "localhost",
        "SSL_CERT_FILE": "/etc/ssl/custom.pem",
        "NODE_EXTRA_CA_CERTS": "/etc/ssl/extra.pem",
    }
    assert "OPENAI_API_KEY" not in env


def test_extra_passthrough_copies_named_variables_only() -> None:
    env = build(policy=EnvPolicy(extra_passthrough=frozenset({"TERM", "NOT_SET_ANYWHERE"})))
    assert env == {**BASE, "TERM": "xterm"}


def test_extra_passthrough_of_a_loader_variable_is_refused() -> None:
    with pytest.raises(EnvironmentPolicyError, match="LD_PRELOAD") as info:
        build(policy=EnvPolicy(extra_passthrough=frozenset({"LD_PRELOAD"})))
    assert info.value.variable == "LD_PRELOAD"
    assert str(info.value).startswith("extra_passthrough names LD_PRELOAD, a variable of the dynamic loader family")
    assert str(info.value).endswith("; or set allow_loader_vars=True")


def test_manifest_env_is_applied_last() -> None:
    env = build({"PYTHONUNBUFFERED": "0", "LANG": "C.UTF-8", "API_BASE": "https://x.invalid"})
    assert env == {**BASE, "PYTHONUNBUFFERED": "0", "LANG": "C.UTF-8", "API_BASE": "https://x.invalid"}


@pytest.mark.parametrize(
    "name",
    [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "DYLD_INSERT_LIBRARIES",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "NODE_OPTIONS",
        "BASH_ENV",
        "ENV",
        "PERL5OPT",
        "PERL5LIB",
        "RUBYOPT",
        "GLIBC_TUNABLES",
        "JAVA_TOOL_OPTIONS",
        "BASH_FUNC_ls%%",
    ],
)
def test_loader_variable_in_manifest_raises_naming_it(name: str) -> None:
    with pytest.raises(EnvironmentPolicyError, match=name.replace("%", ".")) as info:
        build({name: "/tmp/x"})
    assert info.value.variable == name


def test_loader_variable_allowed_by_policy() -> None:
    env = build(
        {"LD_PRELOAD": "/opt/lib.so", "NODE_OPTIONS": "--max-old-space-size=512"},
        EnvPolicy(allow_loader_vars=True),
    )
    assert env == {**BASE, "LD_PRELOAD": "/opt/lib.so", "NODE_OPTIONS": "--max-old-space-size=512"}


def test_function_values_are_dropped_from_host_and_manifest() -> None:
    host = {**HOST, "LANG": "() { :; }; echo pwned"}
    env = build_environment(host, {"FOO": "() { :;}", "BAR": "ok ()"}, EnvPolicy(), tmpdir="/t")
    assert "LANG" not in env
    assert "FOO" not in env
    assert env["BAR"] == "ok ()"


def test_invalid_names_and_nul_values_raise() -> None:
    with pytest.raises(EnvironmentPolicyError, match="A=B"):
        build({"A=B": "x"})
    with pytest.raises(EnvironmentPolicyError, match="GOOD"):
        build({"GOOD": "a\0b"})


def test_missing_or_relative_path_falls_back_to_default() -> None:
    assert build_environment({}, {}, EnvPolicy(), tmpdir="/t")["PATH"] == DEFAULT_PATH
    assert build_environment({"PATH": "bin:.:"}, {}, EnvPolicy(), tmpdir="/t")["PATH"] == DEFAULT_PATH


def test_trim_path_and_is_loader_var() -> None:
    assert trim_path("bin::/usr/bin:/usr/bin:./x:/opt/a") == "/usr/bin:/opt/a"
    assert trim_path("") == ""
    assert is_loader_var("LD_AUDIT")
    assert not is_loader_var("LDAP_URI")
    assert not is_loader_var("PYTHONUNBUFFERED")


def test_login_shell_path_reads_the_profile_path_between_markers(tmp_path: Path) -> None:
    shell = tmp_path / "fake-login-shell"
    shell.write_text(
        '#!/bin/sh\necho "welcome, a chatty profile"\nPATH="/opt/hostd-test/bin:$PATH"\nshift\nexec /bin/sh "$@"\n'
    )
    shell.chmod(0o755)
    found = login_shell_path(str(shell))
    assert found is not None
    assert found.split(":")[0] == "/opt/hostd-test/bin"
    assert login_shell_path(str(tmp_path / "missing-shell")) is None
    assert merge_paths("/a:/b", "/b:/c") == "/a:/b:/c"


async def test_a_login_shell_that_times_out_is_ended_with_what_it_started(tmp_path: Path) -> None:
    """The shell and the background job its profile started (same process group) end with the time-out:
    before, only the shell was killed and its background job ran on (``TooSlowError``: still running after 10 s).
    The job is not the shell's to reap (init is): the test waits, bounded, until the kill has landed."""
    pids = tmp_path / "pids"
    shell = tmp_path / "slow-login-shell"
    shell.write_text(f'#!/bin/sh\nsleep 60 &\necho $! > "{pids}"\nexec sleep 60\n')
    shell.chmod(0o755)
    assert login_shell_path(str(shell), timeout=2.0) is None
    [job] = [int(pid) for pid in pids.read_text().split()]
    await until(lambda: not _running(job), timeout=10)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def test_a_hostd_asked_to_exit_while_the_login_shell_runs_leaves_it_behind_no_more(tmp_path: Path) -> None:
    """``hostd serve`` asks the login shell for its ``PATH`` at start; a hostd told to exit while a slow profile
    still runs ends that shell (sandbox.environment.end_login_shells, at exit). Before, the shell ran on as an
    orphan: ``[True] == [False]``."""
    started = tmp_path / "shell-pid"
    shell = tmp_path / "slow-login-shell"
    shell.write_text(f'#!/bin/sh\necho $$ > "{started}.tmp" && mv "{started}.tmp" "{started}"\nexec sleep 60\n')
    shell.chmod(0o755)
    env = {**plugin_environment(), "SHELL": str(shell)}
    async with HostdClient.spawn(["--state-dir", str(tmp_path / "state")], env=env) as hostd:
        await until(started.exists)
        pid = int(started.read_text())
        assert (await hostd.request("plugins/list", {}))["plugins"] == []
    assert hostd.process.returncode == 0
    assert [_running(pid)] == [False]


# -- issue 9 class 6: a manifest variable that changes what code runs ---------------------------------
# The class: any variable that makes a runtime load, fetch or execute code the approved launch does
# not show (another config, a helper command, an interpreter, an index, a cache, a search path).
# Refused by family, several members of each family below; the allowlist re-admits tuning knobs only.

FAMILY_MEMBERS: dict[str, list[str]] = {
    "dynamic loader": ["LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "ld_preload"],
    "glibc": ["GCONV_PATH", "GLIBC_TUNABLES", "LOCPATH", "HOSTALIASES", "RESOLV_HOST_CONF", "NLSPATH", "MALLOC_CHECK_"],
    "exported bash function": ["BASH_FUNC_ls%%", "BASH_FUNC_git()"],
    "shell startup": ["BASH_ENV", "ENV", "SHELLOPTS", "PS4", "PROMPT_COMMAND", "IFS", "SHELL", "ZDOTDIR"],
    "executable search path": ["PATH", "path"],
    "editor, pager and browser hook": ["EDITOR", "VISUAL", "PAGER", "BROWSER", "LESSOPEN", "LESSCLOSE", "MANPAGER"],
    "host-set folders": ["HOME", "home", "TMPDIR", "TEMP", "XDG_CACHE_HOME"],
    "network proxy": ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "NO_PROXY"],
    "TLS trust": [
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "OPENSSL_CONF",
        "CURL_CA_BUNDLE",
        "NODE_TLS_REJECT_UNAUTHORIZED",
    ],
    "git": [
        "GIT_CONFIG_COUNT",
        "GIT_CONFIG_KEY_0",
        "GIT_CONFIG_VALUE_0",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_GLOBAL",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_PROXY_COMMAND",
        "GIT_ASKPASS",
        "GIT_EXEC_PATH",
        "GIT_DIR",
        "git_ssh",
    ],
    "ssh": ["SSH_ASKPASS", "SSH_AUTH_SOCK"],
    "node and npm": [
        "NODE_OPTIONS",
        "NODE_PATH",
        "npm_config_script_shell",
        "npm_config_registry",
        "npm_config_cache",
        "npm_config_userconfig",
        "npm_config_node_options",
        "YARN_RC_FILENAME",
        "PNPM_HOME",
        "COREPACK_NPM_REGISTRY",
        "BUN_INSTALL",
        "DENO_DIR",
        "ELECTRON_RUN_AS_NODE",
    ],
    "python": [
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PYTHONWARNINGS",
        "PYTHONBREAKPOINT",
        "_PYTHON_SYSCONFIGDATA_NAME",
        "UV_PYTHON",
        "UV_INDEX_URL",
        "UV_EXTRA_INDEX_URL",
        "UV_CACHE_DIR",
        "UV_TOOL_DIR",
        "PIP_INDEX_URL",
        "PIP_CONFIG_FILE",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
    ],
    "runtime version manager": ["VOLTA_HOME", "PYENV_VERSION", "MISE_NODE_VERSION"],
    "build toolchain": [
        "CC",
        "CXX",
        "CFLAGS",
        "LDFLAGS",
        "MAKEFLAGS",
        "CMAKE_C_COMPILER_LAUNCHER",
        "CCACHE_PREFIX",
        "PKG_CONFIG_PATH",
    ],
    "rust": ["CARGO_HOME", "CARGO_BUILD_RUSTC_WRAPPER", "RUSTC_WRAPPER", "RUSTC", "RUSTUP_TOOLCHAIN", "RUSTFLAGS"],
    "go": ["GOPROXY", "GOFLAGS", "GOTOOLCHAIN"],
    "jvm": ["JAVA_TOOL_OPTIONS", "JAVA_HOME", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH", "MAVEN_OPTS"],
    "dotnet": ["DOTNET_STARTUP_HOOKS", "CORECLR_PROFILER_PATH"],
    "perl": ["PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB"],
    "ruby": ["RUBYOPT", "RUBYLIB", "GEM_HOME", "GEM_PATH", "BUNDLE_GEMFILE"],
    "lua, tcl, php and r": ["LUA_INIT", "LUA_PATH", "LUA_CPATH_5_4", "TCLLIBPATH", "TCL_LIBRARY", "PHPRC", "R_PROFILE"],
    "desktop module path": ["GTK_MODULES", "QT_PLUGIN_PATH", "GIO_EXTRA_MODULES", "VK_LAYER_PATH"],
    "programs run on a tool's behalf": [
        "PUPPETEER_EXECUTABLE_PATH",
        "PLAYWRIGHT_BROWSERS_PATH",
        "CHROME_PATH",
        "SASL_PATH",
        "CLOUDSDK_PYTHON",
        "HGEDITOR",
        "GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES",
    ],
}


@pytest.mark.parametrize(
    ("label", "name"), [(label, name) for label, names in FAMILY_MEMBERS.items() for name in names]
)
def test_every_member_of_a_refused_family_is_refused_with_its_family(label: str, name: str) -> None:
    family = env_family(name)
    assert family is not None
    assert family.label == label
    assert is_loader_var(name)
    with pytest.raises(EnvironmentPolicyError) as info:
        build({"API_BASE": "https://x.invalid", name: "/tmp/x"})
    assert info.value.variable == name
    assert str(info.value) == env_policy_message(name, family)
    assert str(info.value).startswith(f"manifest env sets {name}, a variable of the {label} family ({family.pattern}),")


def test_the_refusal_names_variable_family_and_what_to_do_exactly() -> None:
    with pytest.raises(EnvironmentPolicyError) as info:
        build({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": "touch /tmp/p"})
    assert info.value.variable == "GIT_CONFIG_COUNT"
    assert str(info.value) == (
        "manifest env sets GIT_CONFIG_COUNT, a variable of the git family (GIT_*), which can make a runtime "
        "run code the launch does not show: its members configure git (GIT_CONFIG_COUNT/KEY_n/VALUE_n, "
        "GIT_CONFIG_GLOBAL), its helpers (GIT_SSH, GIT_PROXY_COMMAND, GIT_ASKPASS, GIT_EDITOR) and where it "
        "finds its programs (GIT_EXEC_PATH); remove it from the server's env (the env of its entry in the "
        "config you import, or of its manifest) and install it again (allowed in this family: "
        "GIT_AUTHOR_EMAIL, GIT_AUTHOR_NAME, GIT_COMMITTER_EMAIL, GIT_COMMITTER_NAME, GIT_TERMINAL_PROMPT)"
    )
    with pytest.raises(EnvironmentPolicyError) as info:
        build({"PATH": "/opt/tools/bin:/usr/bin"})
    assert str(info.value) == (
        "manifest env sets PATH, a variable of the executable search path family (PATH), which can make a "
        "runtime run code the launch does not show: its members decide which program every bare command the "
        "plugin runs (sh, node, git, python) resolves to; remove it from the server's env (the env of its entry "
        "in the config you import, or of its manifest) and install it again: hostd passes the host's PATH "
        "(absolute entries only); ship your own programs in the plugin folder and name them with a path "
        "command such as ./bin/server"
    )


@pytest.mark.parametrize(
    "name",
    [
        "npm_config_script_shell",
        "NPM_CONFIG_SCRIPT_SHELL",
        "Npm_Config_Script_Shell",
        "npm_CONFIG_script-shell",
        "NPM_CONFIG_REGISTRY",
        "npm_config_Registry",
    ],
)
def test_npm_config_is_refused_in_any_case(name: str) -> None:
    with pytest.raises(EnvironmentPolicyError) as info:
        build({name: "/bin/sh"})
    assert info.value.variable == name
    assert f"manifest env sets {name}, a variable of the node and npm family" in str(info.value)


def test_allowlisted_members_are_accepted_with_their_values() -> None:
    manifest = {
        "GIT_AUTHOR_NAME": "Ada",
        "GIT_AUTHOR_EMAIL": "ada@example.invalid",
        "GIT_COMMITTER_NAME": "Ada",
        "GIT_COMMITTER_EMAIL": "ada@example.invalid",
        "GIT_TERMINAL_PROMPT": "0",
        "PYTHONUNBUFFERED": "1",
        "PYTHONUTF8": "1",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "NODE_ENV": "production",
        "NODE_NO_WARNINGS": "1",
        "UV_NO_PROGRESS": "1",
        "UV_OFFLINE": "1",
        "UV_SYSTEM_CERTS": "true",
        "UV_THREADPOOL_SIZE": "8",
        "npm_config_prefer_offline": "true",
        "NPM_CONFIG_UPDATE_NOTIFIER": "false",
        "npm_config_fund": "false",
        "TERM": "dumb",
        "API_BASE": "https://x.invalid",
        "LDAP_URI": "ldap://x.invalid",
        "LESSONS": "3",
    }
    assert build(manifest) == {**BASE, **manifest}
    for name in ALLOWED_ENV:
        assert env_family(name) is None, name


def test_shipped_manifests_env_is_accepted() -> None:
    root = Path(__file__).resolve().parent.parent / "manifests"
    seen = 0
    for manifest in sorted(root.glob("*/plugin.yaml")):
        env = yaml.safe_load(manifest.read_text())["backend"].get("env") or {}
        build(env)
        seen += len(env)
    assert seen >= 2


def test_every_name_of_the_old_exact_list_is_still_refused() -> None:
    assert sorted(n for n in LOADER_VARS if not is_loader_var(n)) == []


def test_allow_loader_vars_is_the_escape_hatch_for_every_family() -> None:
    manifest = {names[0]: "x" for names in FAMILY_MEMBERS.values()}
    env = build(manifest, EnvPolicy(allow_loader_vars=True))
    assert {name: env[name] for name in manifest} == manifest


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("OPENAI_API_KEY", True),
        ("GITHUB_TOKEN", True),
        ("gh_token", True),
        ("DB_PASSWORD", True),
        ("SMTP_PASS", True),
        ("CLIENT_SECRET", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("GOOGLE_APPLICATION_CREDENTIALS", True),
        ("SESSION_COOKIE", True),
        ("SENTRY_DSN", True),
        ("TLS_PRIVATE_KEY", True),
        ("CLIENT_CERT", True),
        ("AUTHORIZATION", True),
        ("SLACK_WEBHOOK_URL", True),
        ("API_BASE", False),
        ("NODE_ENV", False),
        ("LOG_LEVEL", False),
        ("GIT_AUTHOR_NAME", False),
        ("TZ", False),
        ("PYTHONIOENCODING", False),
    ],
)
def test_is_secret_name(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


async def test_a_plugin_setting_git_config_in_env_is_refused_at_install_and_enable(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    """A real hostd: the manifest's GIT_CONFIG_* would make any git the plugin runs execute core.fsmonitor."""
    marker = tmp_path / "fsmonitor-ran"
    env = {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.fsmonitor",
        "GIT_CONFIG_VALUE_0": f"touch {marker}",
    }
    folder = make_plugin(backend={"env": env})
    expected = env_policy_message("GIT_CONFIG_COUNT", env_family("GIT_CONFIG_COUNT"))  # type: ignore[arg-type]
    with trio.fail_after(20):
        async with spawn_hostd(tmp_path) as hostd:
            info = await hostd.request("plugins/install", {"path": str(folder)})
            assert info["launch"] == {"kind": "ENV_POLICY", "error": f"command 'python3': {expected}"}
            await hostd.request("plugins/grant", {"id": info["id"], "permissions": info["permissions"]})
            with pytest.raises(RpcError) as failed:
                await hostd.request("plugins/enable", {"id": info["id"]})
            assert failed.value.kind == "PLUGIN_START_FAILED"
            assert failed.value.data["launchError"] == "ENV_POLICY"
            assert failed.value.data["reason"] == f"command 'python3': {expected}"
            statuses = [s["status"] for s in hostd.seen("plugins/statusChanged") if s["plugin_id"] == info["id"]]
            assert "starting" not in statuses
            assert "ready" not in statuses
    assert not marker.exists()


@pytest.mark.parametrize(
    ("name", "family"),
    [
        # npm reads $PREFIX/etc/npmrc, whose script-shell it runs: a plugin wrote both into its data folder.
        ("PREFIX", "install prefix"),
        ("DESTDIR", "install prefix"),
        ("TMPDIR", "host-set folders"),
        ("TEMP", "host-set folders"),
        ("ERL_AFLAGS", "other runtimes' load paths"),
        ("JULIA_DEPOT_PATH", "other runtimes' load paths"),
        ("PYTEST_PLUGINS", "other runtimes' load paths"),
        ("DJANGO_SETTINGS_MODULE", "other runtimes' load paths"),
        ("PUPPETEER_EXECUTABLE_PATH", "programs run on a tool's behalf"),
        ("RSYNC_RSH", "programs run on a tool's behalf"),
        ("PKCS11_MODULE_PATH", "programs run on a tool's behalf"),
    ],
)
def test_families_found_by_an_attack_are_refused(name: str, family: str) -> None:
    with pytest.raises(EnvironmentPolicyError) as refused:
        build({name: "/x"})
    assert refused.value.variable == name
    assert f"a variable of the {family} family" in str(refused.value)
