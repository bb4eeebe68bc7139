"""The package spec grammar (:func:`hostd.install.packages.npm_spec`, :func:`~hostd.install.packages.python_spec`,
issue 23).

The class under test: *a word of package text reaching npm or uv as something other than a
registry package of a known version*. A config's ``args``, a bundle's ``mcp_config``, a registry
entry and the values of ``--package``/``--from``/``--with``/``--spec`` are attacker text; as an
installer operand such a word could be an option (``--ignore-scripts=false`` re-enables install
scripts), a path, a URL, a git source, an alias, a tarball, a hosted-git shorthand or a range.
Each class is tested with several members, for every tool and field a word can come from, and
through a real ``hostd serve`` whose ``PATH`` holds fake installers that would say so if run.
"""

from __future__ import annotations

import pytest

from hostd.install.packages import (
    NPM_FORMS,
    PYTHON_FORMS,
    PackageLaunch,
    PrepareError,
    Spec,
    npm_spec,
    parse_package_launch,
    program_name,
    python_request,
    python_spec,
)

# -- npm ------------------------------------------------------------------------------------------

NPM_ACCEPTED = {
    "pkg": Spec("pkg", None, (), "pkg"),
    "pkg@1.2.3": Spec("pkg", "1.2.3", (), "pkg@1.2.3"),
    "pkg@latest": Spec("pkg", None, (), "pkg"),
    "@scope/x@1.0.0-rc.1": Spec("@scope/x", "1.0.0-rc.1", (), "@scope/x@1.0.0-rc.1"),
    "@scope/x": Spec("@scope/x", None, (), "@scope/x"),
    "a.b_c~d-e@0.0.1+build.5": Spec("a.b_c~d-e", "0.0.1+build.5", (), "a.b_c~d-e@0.0.1+build.5"),
    "@modelcontextprotocol/server-memory@2026.8.31": Spec(
        "@modelcontextprotocol/server-memory", "2026.8.31", (), "@modelcontextprotocol/server-memory@2026.8.31"
    ),
}

#: word -> the class the message names. Every member is refused with reason spec-unsupported.
NPM_REFUSED = {
    # options
    "--ignore-scripts=false": "an option",
    "--foreground-scripts": "an option",
    "--registry=http://127.0.0.1:9/": "an option",
    "-g": "an option",
    # paths and tarballs
    "./pkg.tgz": "a path",
    "../pkg": "a path",
    "/abs/path": "a path",
    "~/pkg": "a path",
    ".": "a path",
    "C:\\pkg": "a path",
    "pkg.tgz": "an archive file",
    "pkg.tar.gz": "an archive file",
    "pkg.tar": "an archive file",
    "@scope/x.tgz@1.0.0": "an archive file",
    "x.tgz@1.0.0": "an archive file",
    "x.tar.gz@latest": "an archive file",
    # sources and aliases
    "file:../x": "a file: source",
    "git+https://github.com/u/r": "a URL or git source",
    "git+ssh://git@github.com/u/r.git": "a URL or git source",
    "git@github.com:u/r": "a URL or git source",
    "https://example.invalid/x.tgz": "a URL or git source",
    "github:u/r": "a github: source",
    "gitlab:u/r": "a gitlab: source",
    "npm:other@1.0.0": "an alias of another package",
    "u/r": "a hosted-git shorthand",
    "u/r#main": "a hosted-git shorthand",
    # ranges and tags
    "pkg@>=1": "not an exact version",
    "pkg@^1.2.3": "not an exact version",
    "pkg@~1.2": "not an exact version",
    "pkg@1": "not an exact version",
    "pkg@1.x": "not an exact version",
    "pkg@next": "not an exact version",
    "pkg@v1.2.3": "not an exact version",
    "pkg@01.2.3": "not an exact version",
    "pkg@*": "not an exact version",
    # names npm refuses
    "Pkg": "not an npm package name",
    "_pkg": "not an npm package name",
    "@/x": "not an npm package name",
    "${user_config.package}": "not an npm package name",
    "node_modules": "a name npm reserves",
    "pkg@1.2.3 ": "not one word",
    "x" * 215: "not an npm package name",
}


@pytest.mark.parametrize("word", sorted(NPM_ACCEPTED))
def test_npm_names_and_exact_versions_are_accepted(word: str) -> None:
    assert npm_spec(word, "npx package") == NPM_ACCEPTED[word]


@pytest.mark.parametrize("word", sorted(NPM_REFUSED))
def test_other_npm_words_are_refused_with_the_supported_forms(word: str) -> None:
    with pytest.raises(PrepareError) as refused:
        npm_spec(word, "npx --package")
    assert refused.value.reason == "spec-unsupported"
    message = str(refused.value)
    assert message.startswith("npx --package " + repr(word)[:20])
    assert f" is {NPM_REFUSED[word]}" in message
    assert message.endswith(f"; supported: {NPM_FORMS}")
    assert "npm: name or name@1.2.3" in message


# -- Python ---------------------------------------------------------------------------------------

PYTHON_ACCEPTED = {
    "pkg": Spec("pkg", None, (), "pkg"),
    "pkg==1.0": Spec("pkg", "1.0", (), "pkg==1.0"),
    "pkg@1.0": Spec("pkg", "1.0", (), "pkg==1.0"),
    "pkg@latest": Spec("pkg", None, (), "pkg"),
    "mcp[cli]==1.9.0": Spec("mcp", "1.9.0", ("cli",), "mcp[cli]==1.9.0"),
    "pkg[b,a]": Spec("pkg", None, ("a", "b"), "pkg[a,b]"),
    "Mcp_Server.x==2026.10.19": Spec("Mcp_Server.x", "2026.10.19", (), "Mcp_Server.x==2026.10.19"),
    "pkg==1!2.0rc1.post3.dev4+local.7": Spec(
        "pkg", "1!2.0rc1.post3.dev4+local.7", (), "pkg==1!2.0rc1.post3.dev4+local.7"
    ),
}

PYTHON_REFUSED = {
    # options
    "-e": "an option",
    "--index-url=http://127.0.0.1:9/simple": "an option",
    "--extra-index-url=http://x": "an option",
    "-r": "an option",
    # URLs, paths, archives
    "pkg @ https://example.invalid/x.whl": "a URL or git source",
    "pkg@https://example.invalid/x.whl": "a URL or git source",
    "git+https://github.com/u/r": "a URL or git source",
    "https://example.invalid/x-1.0.tar.gz": "a URL or git source",
    "file:///tmp/x": "a URL or git source",
    "file:../x": "a file: source",
    ".": "a path",
    "./x": "a path",
    "/abs/x": "a path",
    "~/x": "a path",
    "x-1.0-py3-none-any.whl": "an archive file",
    "x-1.0.tar.gz": "an archive file",
    "x.zip": "an archive file",
    "x.whl@1.0": "an archive file",
    "x.tar.gz[cli]==1.0": "an archive file",
    "u/r": "not a Python package name",
    # ranges, markers, wildcards
    "pkg>=1": "a version range",
    "pkg~=1.0": "a version range",
    "pkg!=1": "a version range",
    "pkg<2": "a version range",
    "pkg[cli]>=1": "a version range",
    "pkg==1.0,<2": "a version range",
    "pkg==1.*": "a wildcard version",
    "pkg===1.0": "an arbitrary-equality (===) requirement",
    "pkg==1.0;python_version<'4'": "a requirement with an environment marker",
    "pkg==v1.0": "not an exact version",
    "pkg==1.0-": "not an exact version",
    "pkg@^1": "not an exact version",
    "a,b": "a list or a range",
    "pkg[]": "not a Python package name",
    "pkg[a b]": "not one word",
    "_pkg": "not a Python package name",
    "${user_config.package}": "not a Python package name",
}


@pytest.mark.parametrize("word", sorted(PYTHON_ACCEPTED))
def test_python_names_and_exact_versions_are_accepted(word: str) -> None:
    assert python_spec(word, "uvx --with") == PYTHON_ACCEPTED[word]


@pytest.mark.parametrize("word", sorted(PYTHON_REFUSED))
def test_other_python_words_are_refused_with_the_supported_forms(word: str) -> None:
    with pytest.raises(PrepareError) as refused:
        python_spec(word, "uvx --with")
    assert refused.value.reason == "spec-unsupported"
    message = str(refused.value)
    assert message.startswith("uvx --with " + repr(word)[:20])
    assert f" is {PYTHON_REFUSED[word]}" in message
    assert message.endswith(f"; supported: {PYTHON_FORMS}")
    assert "python: name or name==1.2.3" in message


@pytest.mark.parametrize(
    ("word", "version"),
    [
        ("3", "3"),
        ("3.12", "3.12"),
        ("3.12.4", "3.12.4"),
        ("python3.12", "3.12"),
        ("cpython3.12", "3.12"),
        ("cpython-3.11", "3.11"),
    ],
)
def test_a_python_request_is_a_plain_version(word: str, version: str) -> None:
    assert python_request(word, "uvx --python") == version


@pytest.mark.parametrize(
    ("word", "why"),
    [
        ("./bin/python", "a path"),
        ("/usr/bin/python3", "a path"),
        ("venv/bin/python", "a path"),
        ("-x", "an option"),
        (">=3.11", "not a version"),
        ("pypy3.10", "not a version"),
        ("2.7", "not a version"),
        ("3.12 ", "not a version"),
        ("", "not a version"),
    ],
)
def test_any_other_python_request_is_refused(word: str, why: str) -> None:
    with pytest.raises(PrepareError) as refused:
        python_request(word, "uvx --python")
    assert refused.value.reason == "spec-unsupported"
    assert str(refused.value) == (
        f"uvx --python {word!r} is {why}; supported: a Python version: 3.12, 3.12.4, python3.12 or cpython3.12"
    )


@pytest.mark.parametrize("word", ["./bin/x", "/usr/bin/x", "-x", "--help", "a/b", "x y", "", "@scope/x", "x;y"])
def test_a_program_is_a_plain_name(word: str) -> None:
    with pytest.raises(PrepareError) as refused:
        program_name(word, "npx command")
    assert refused.value.reason == "spec-unsupported"
    assert "a plain program name" in str(refused.value)


# -- every tool and field goes through the grammar ------------------------------------------------

#: (command, args, where the word came from, the word): one launch per tool and field.
HOSTILE_LAUNCHES = [
    ("npx", ["-y", "./evil.tgz"], "npx package", "./evil.tgz"),
    ("npx", ["-y", "github:u/r"], "npx package", "github:u/r"),
    ("npx", ["-y", "u/r"], "npx package", "u/r"),
    ("npx", ["-y", "npm:other@1.0.0"], "npx package", "npm:other@1.0.0"),
    ("npx", ["--", "--ignore-scripts=false"], "npx package", "--ignore-scripts=false"),
    ("npx", ["-y", "pkg@>=1"], "npx package", "pkg@>=1"),
    ("npx", ["-y", "--package=--ignore-scripts=false", "bin"], "npx --package", "--ignore-scripts=false"),
    ("npx", ["-p", "--foreground-scripts", "bin"], "npx --package", "--foreground-scripts"),
    ("npx", ["-p", "https://example.invalid/x.tgz", "bin"], "npx --package", "https://example.invalid/x.tgz"),
    ("npx", ["-p", "pkg@1.0.0", "./bin/evil"], "npx command", "./bin/evil"),
    ("uvx", ["./evil"], "uvx package", "./evil"),
    ("uvx", ["pkg>=1"], "uvx package", "pkg>=1"),
    ("uvx", ["--from", "git+https://example.invalid/x", "x"], "uvx --from", "git+https://example.invalid/x"),
    ("uvx", ["--from=./x", "x"], "uvx --from", "./x"),
    ("uvx", ["--from", "pkg==1.0", "/bin/sh"], "uvx command", "/bin/sh"),
    ("uvx", ["--with", "--index-url=http://127.0.0.1:9/", "pkg==1.0"], "uvx --with", "--index-url=http://127.0.0.1:9/"),
    ("uvx", ["--with", "httpx==0.28.1,-e", "pkg==1.0"], "uvx --with", "-e"),
    ("uvx", ["-w", "x @ https://example.invalid/x.whl", "pkg"], "uvx --with", "x @ https://example.invalid/x.whl"),
    ("uvx", ["--python", "./bin/python", "pkg==1.0"], "uvx --python", "./bin/python"),
    ("uvx", ["-p", "/usr/bin/python3", "pkg==1.0"], "uvx --python", "/usr/bin/python3"),
    ("uv", ["tool", "run", "--from", "file:../x", "x"], "uv tool run --from", "file:../x"),
    ("uv", ["-q", "tool", "run", "x.whl"], "uv tool run package", "x.whl"),
    ("uv", ["run", "--with", "-e", "python", "s.py"], "uv run --with", "-e"),
    ("uv", ["run", "--with", "fastmcp>=2", "python", "s.py"], "uv run --with", "fastmcp>=2"),
    ("uv", ["run", "--with", "fastmcp==2.3.0,./x", "python", "s.py"], "uv run --with", "./x"),
    (
        "uv",
        ["run", "--with", "x==1.0", "--python", "/usr/bin/python3", "python"],
        "uv run --python",
        "/usr/bin/python3",
    ),
    ("uv", ["run", "--with", "x==1.0", "--", "-c"], "uv run command", "-c"),
    (
        "uv",
        ["run", "--with", "x==1.0", "https://example.invalid/s.py"],
        "uv run command",
        "https://example.invalid/s.py",
    ),
    ("uv", ["run", "--with", "x==1.0", "./bin/tool"], "uv run command", "./bin/tool"),
    ("pipx", ["run", "./evil"], "pipx run package", "./evil"),
    (
        "pipx",
        ["run", "--spec", "git+https://example.invalid/x", "x"],
        "pipx run --spec",
        "git+https://example.invalid/x",
    ),
    ("pipx", ["run", "--spec", "x==1.0", "../bin/x"], "pipx run command", "../bin/x"),
    ("pipx", ["run", "https://example.invalid/script.py"], "pipx run package", "https://example.invalid/script.py"),
    ("pipx", ["run", "--python", "/usr/bin/python3", "x==1.0"], "pipx run --python", "/usr/bin/python3"),
]


@pytest.mark.parametrize(("command", "args", "where", "word"), HOSTILE_LAUNCHES)
def test_every_operand_of_every_tool_is_validated(command: str, args: list[str], where: str, word: str) -> None:
    with pytest.raises(PrepareError) as refused:
        parse_package_launch(command, args)
    assert refused.value.reason == "spec-unsupported"
    assert str(refused.value).startswith(f"{where} {word!r} is "), str(refused.value)
    assert "; supported: " in str(refused.value)


@pytest.mark.parametrize(
    ("command", "args", "said"),
    [
        ("uv", ["--directory", "/srv/x", "run", "--with", "x==1.0", "python", "s.py"], "uv option '--directory'"),
        ("uv", ["--project=/srv/x", "tool", "run", "x==1.0"], "uv option '--project'"),
        ("uv", ["run", "--directory", "/srv/x", "--with", "x==1.0", "python", "s.py"], "uv run option '--directory'"),
        ("uv", ["--index-url", "http://x", "run", "--with", "x", "python"], "uv option '--index-url' before"),
        ("uv", ["run", "--with-editable", "./x", "python", "s.py"], "uv run option '--with-editable'"),
        ("uv", ["run", "--with-requirements", "r.txt", "s.py"], "uv run option '--with-requirements'"),
        ("uvx", ["--index", "http://x", "pkg"], "uvx option '--index'"),
        (
            "pipx",
            ["run", "--pip-args=--index-url=http://x", "pkg"],
            "pipx run option '--pip-args=--index-url=http://x'",
        ),
        ("pipx", ["run", "--index-url", "http://x", "pkg"], "pipx run option '--index-url'"),
        ("pipx", ["run", "--editable", "pkg"], "pipx run option '--editable'"),
        ("pipx", ["--verbose", "run", "pkg"], "pipx option '--verbose'"),
        ("npx", ["--ignore-scripts=false", "pkg@1.0.0"], "npx option '--ignore-scripts=false'"),
        ("npx", ["--foreground-scripts", "-y", "pkg@1.0.0"], "npx option '--foreground-scripts'"),
    ],
)
def test_options_that_change_what_or_where_are_refused(command: str, args: list[str], said: str) -> None:
    with pytest.raises(PrepareError) as refused:
        parse_package_launch(command, args)
    assert refused.value.reason == "unsupported"
    assert str(refused.value).startswith(said), str(refused.value)


@pytest.mark.parametrize(
    ("command", "args", "expected"),
    [
        (
            "pipx",
            ["run", "mcp-server-time==2026.10.19", "--local-timezone", "UTC"],
            PackageLaunch("uv", ("mcp-server-time==2026.10.19",), "mcp-server-time", ("--local-timezone", "UTC")),
        ),
        (
            "pipx",
            ["run", "--no-cache", "--spec", "mcp-server-git==2026.10.19", "--python", "python3.12", "mcp-server-git"],
            PackageLaunch("uv", ("mcp-server-git==2026.10.19",), "mcp-server-git", (), "3.12"),
        ),
        (
            "uv",
            ["-q", "--no-cache", "run", "--with", "fastmcp==2.3.0", "python", "/srv/s.py"],
            PackageLaunch("uv", ("fastmcp==2.3.0",), "python", ("/srv/s.py",)),
        ),
        (
            "uv",
            ["run", "--with", "fastmcp==2.3.0", "server.py"],
            PackageLaunch("uv", ("fastmcp==2.3.0",), "server.py", ()),
        ),
        (
            "uv",
            ["--quiet", "tool", "run", "--python", "cpython3.11", "mcp-server-fetch@latest"],
            PackageLaunch("uv", ("mcp-server-fetch",), "mcp-server-fetch", (), "3.11"),
        ),
        (
            "uvx",
            ["--with", "httpx==0.28.1,anyio", "mcp-server-fetch==2026.10.24"],
            PackageLaunch("uv", ("mcp-server-fetch==2026.10.24", "httpx==0.28.1", "anyio"), "mcp-server-fetch", ()),
        ),
        (
            "npx",
            ["-y", "pkg@latest", "--ignore-scripts=false", "./x"],  # after the package: the server's own arguments
            PackageLaunch("npm", ("pkg",), "", ("--ignore-scripts=false", "./x")),
        ),
    ],
)
def test_new_forms_and_server_arguments(command: str, args: list[str], expected: PackageLaunch) -> None:
    assert parse_package_launch(command, args) == expected


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("uv", ["--directory", "/srv/weather", "run", "weather.py"]),  # a project: its own lock, no package named
        ("uv", ["-q", "run", "server.py", "--with", "x"]),  # --with is the script's own argument
        ("pipx", ["list"]),
    ],
)
def test_launches_naming_no_package_stay_alone(command: str, args: list[str]) -> None:
    assert parse_package_launch(command, args) is None


def test_unpinned_packages_are_named() -> None:
    npm = parse_package_launch("npx", ["-p", "@scope/a@1.0.0", "-p", "b@latest", "-p", "@scope/c", "bin"])
    assert npm is not None and npm.unpinned == ("b", "@scope/c")
    uv = parse_package_launch("uvx", ["--with", "httpx,anyio==4.0", "--from", "pkg[cli]", "pkg"])
    assert uv is not None and uv.packages == ("pkg[cli]", "httpx", "anyio==4.0")
    assert uv.unpinned == ("pkg", "httpx")
    pinned = parse_package_launch("uvx", ["mcp-server-time==2026.10.19"])
    assert pinned is not None and pinned.unpinned == ()


@pytest.mark.parametrize(
    ("command", "args", "key"),
    [
        # The keys of the code before the grammar: an environment prepared then is found again.
        ("npx", ["-y", "@modelcontextprotocol/server-memory@2026.8.31"], "211609a172dbbd04"),
        ("uvx", ["--from", "mcp-server-time==2026.10.19", "mcp-server-time"], "656efceaea6e1418"),
        (
            "uv",
            ["run", "--with", "mcp[cli]==1.9.0,httpx==0.28.1", "--no-project", "mcp", "run", "s.py"],
            "98e7b56930fb2dc0",
        ),
        ("npx", ["--package=@scope/tools@1.2.3", "-p", "extra@2.0.1", "tools-server"], "32aa88051c5ee62c"),
    ],
)
def test_pinned_launches_keep_their_environment_key(command: str, args: list[str], key: str) -> None:
    launch = parse_package_launch(command, args)
    assert launch is not None and launch.key == key
