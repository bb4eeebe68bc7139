"""The environment policy: an allowlist, the proxy group on demand, loader variables refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.environment import (
    DEFAULT_PATH,
    EnvironmentPolicyError,
    EnvPolicy,
    build_environment,
    is_loader_var,
    login_shell_path,
    merge_paths,
    trim_path,
)

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


def test_manifest_env_is_applied_last() -> None:
    env = build({"PYTHONUNBUFFERED": "0", "HOME": "/data/plugin", "API_BASE": "https://x.invalid"})
    assert env == {**BASE, "PYTHONUNBUFFERED": "0", "HOME": "/data/plugin", "API_BASE": "https://x.invalid"}


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
