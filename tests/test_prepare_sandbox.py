"""Preparation runs no package code outside the sandbox (issue "Preparation is sandboxed").

The class under test: *package text that makes an installer run the package's own code on the
host, before approval*. Members built here as real packages on a loopback index (no network):

- a pure wheel whose ``.pth`` file holds code (run by any start of the new environment's
  interpreter, as ``uv pip install --compile-bytecode`` did);
- a source distribution with an in-tree build backend (run by a source build, which
  preparation did whenever a package had no wheel);
- the same backend with the build allowed on purpose: its code runs, and the test shows what it
  could reach from inside the installer's sandbox (nothing but its own folders).

Each hostile package tries to write a canary outside its environment and to read a secret file
beside it; the assertions are on those files and on what the package's code itself reported,
never on log lines of hostd.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import os
import shutil
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from hostd.cli.client import plugin_environment
from hostd.install.ecosystems import Prepared, Registries
from hostd.install.packages import PackageLaunch, PrepareError, parse_package_launch
from hostd.install.prepare import MARKER, prepare
from tests.platform_facts import need_layers

#: Seconds one preparation of a local package may take.
PREPARE_TIMEOUT = 120.0


def _path() -> str:
    path = plugin_environment()["PATH"]
    if shutil.which("uv", path=path) is None:
        pytest.skip("uv is not on PATH")
    return path


# -- the hostile code ---------------------------------------------------------------------------


def _probe_code(outside: Path, secret: Path, direct: int) -> str:
    """Python that tries to write ``outside``, read ``secret`` and connect straight to ``127.0.0.1:direct`` (the
    loopback index, which answers anyone on the host's loopback); it prints what it managed, one line."""
    return (
        "import os\n"
        "def _hostile_report():\n"
        "    said = []\n"
        "    try:\n"
        f"        open({str(outside)!r}, 'w').write('ran')\n"
        "        said.append('write-outside=done')\n"
        "    except OSError as exc:\n"
        "        said.append('write-outside=' + type(exc).__name__)\n"
        "    try:\n"
        f"        said.append('read-secret=' + open({str(secret)!r}).read())\n"
        "    except OSError as exc:\n"
        "        said.append('read-secret=' + type(exc).__name__)\n"
        "    said.append('home-is-private=' + str(os.environ.get('HOME', '').endswith('/home')))\n"
        "    import socket\n"
        "    try:\n"
        f"        socket.create_connection(('127.0.0.1', {direct}), timeout=10).close()\n"
        "        said.append('connect-direct=done')\n"
        "    except OSError as exc:\n"
        "        said.append('connect-direct=' + type(exc).__name__)\n"
        "    return 'HOSTILE ' + ' '.join(said)\n"
    )


def _wheel(folder: Path, name: str, pth_line: str) -> Path:
    """A pure wheel ``<name>-1.0`` whose ``<name>.pth`` is ``pth_line`` (and a console script)."""
    dist = f"{name}-1.0.dist-info"
    files = {
        f"{name}/__init__.py": "def main() -> None:\n    print('hello')\n",
        f"{name}.pth": pth_line + "\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist}/entry_points.txt": f"[console_scripts]\n{name} = {name}:main\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    wheel = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def _sdist(folder: Path, name: str, backend: str) -> Path:
    """A source distribution ``<name>-1.0.tar.gz`` whose build backend is its own ``backend.py``."""
    files = {
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        "pyproject.toml": f'[project]\nname = "{name}"\nversion = "1.0"\n\n'
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n',
        "backend.py": backend,
    }
    sdist = folder / f"{name}-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-1.0/{path}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return sdist


@pytest.fixture
def index(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A PEP 503 simple index on loopback: ``(url of /simple, folder the packages go into)``."""
    root = tmp_path / "index"
    (root / "files").mkdir(parents=True)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple", root / "files"
    finally:
        server.shutdown()
        server.server_close()


def _publish(index_files: Path, artifact: Path, name: str) -> None:
    """List ``artifact`` (already in ``index_files``) as the only file of project ``name``."""
    project = index_files.parent / "simple" / name
    project.mkdir(parents=True, exist_ok=True)
    (project / "index.html").write_text(f'<a href="../../files/{artifact.name}">{artifact.name}</a>\n')


def _port(url: str) -> int:
    """The port of a loopback index's URL (``http://127.0.0.1:PORT/simple``)."""
    return int(url.split(":")[2].split("/", maxsplit=1)[0])


async def _prepare(
    state: Path,
    launch: PackageLaunch,
    registry: str,
    *,
    allow_build: bool = False,
    said: list[str] | None = None,
    environ: dict[str, str] | None = None,
    registries: Registries | None = None,
) -> Prepared:
    """:func:`prepare` from the index at ``registry``; ``said`` collects the progress messages, then the log lines
    (each ``"log: ..."``) in the order they came."""

    async def progress(step: int, total: int, message: str) -> None:
        if said is not None:
            said.append(message)

    async def log(message: str) -> None:
        if said is not None:
            said.append(f"log: {message}")

    with trio.fail_after(PREPARE_TIMEOUT):
        return await prepare(
            state,
            "hostile",
            launch,
            registries=registries or Registries(python=registry),
            path=_path(),
            progress=progress,
            environ={**plugin_environment(), "HOME": str(state.parent / "user-home"), **(environ or {})},
            log=log,
            **({"allow_build": True} if allow_build else {}),
        )


def _canaries(tmp_path: Path) -> tuple[Path, Path]:
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    return tmp_path / "canary-outside", secret


# -- members of the class --------------------------------------------------------------------------


async def test_a_pth_file_of_a_wheel_never_runs_during_preparation(tmp_path: Path, index: tuple[str, Path]) -> None:
    """Failed before: ``uv pip install --compile-bytecode`` started the environment's interpreter on the
    host, whose ``site`` ran the ``.pth`` line: the canary outside appeared."""
    url, files = index
    outside, _secret = _canaries(tmp_path)
    pth = f"import os; open({str(outside)!r}, 'w').write('ran')"
    _publish(files, _wheel(files, "evil_pth", pth), "evil-pth")
    launch = parse_package_launch("uvx", ["--from", "evil-pth==1.0", "evil_pth"])
    assert launch is not None
    prepared = await _prepare(tmp_path / "state", launch, url)
    assert not outside.exists()
    root = Path(prepared.root)
    assert (root / MARKER).is_file()
    assert (root / "requirements.lock").read_text() == "evil_pth==1.0\n"
    # The sources are compiled (isolated mode, no site): the plugin need not compile at each start.
    assert list(root.glob("venv/lib/python*/site-packages/evil_pth/__pycache__/__init__.*.pyc"))


async def test_a_source_build_is_refused_unless_allowed(tmp_path: Path, index: tuple[str, Path]) -> None:
    """Failed before: the sdist's in-tree backend ran on the host during preparation (canary written)."""
    url, files = index
    outside, secret = _canaries(tmp_path)
    backend = _probe_code(outside, secret, _port(url)) + (
        "def get_requires_for_build_wheel(config_settings=None):\n"
        "    raise SystemExit(_hostile_report())\n"
        "build_wheel = get_requires_for_build_wheel\n"
    )
    _publish(files, _sdist(files, "evil_build", backend), "evil-build")
    launch = parse_package_launch("uvx", ["--from", "evil-build==1.0", "evil_build"])
    assert launch is not None
    with pytest.raises(PrepareError) as caught:
        await _prepare(tmp_path / "state", launch, url)
    assert caught.value.reason == "source-build-required"
    assert "allowBuild" in str(caught.value)
    assert not outside.exists()
    assert not any("HOSTILE" in line for line in caught.value.output)
    assert not (tmp_path / "state" / "prepared" / "hostile" / launch.key).exists()


async def test_package_code_that_runs_on_purpose_reaches_nothing_outside_its_folders(
    tmp_path: Path, index: tuple[str, Path]
) -> None:
    """With the build allowed, the backend's own code runs: inside the installer's sandbox it can
    neither write beside the state folder nor read a file there, and its HOME is hostd's empty one."""
    need_layers("landlock-fs")  # without it the sandbox has no file rules to show
    url, files = index
    outside, secret = _canaries(tmp_path)
    backend = _probe_code(outside, secret, _port(url)) + (
        "import sys\n"
        "def get_requires_for_build_wheel(config_settings=None):\n"
        "    print(_hostile_report(), file=sys.stderr)\n"
        "    raise SystemExit(1)\n"
        "build_wheel = get_requires_for_build_wheel\n"
    )
    _publish(files, _sdist(files, "evil_build", backend), "evil-build")
    launch = parse_package_launch("uvx", ["--from", "evil-build==1.0", "evil_build"])
    assert launch is not None
    with pytest.raises(PrepareError) as caught:
        await _prepare(tmp_path / "state", launch, url, allow_build=True)
    reports = [line.strip() for line in caught.value.output if "HOSTILE" in line]
    assert reports, caught.value.output  # the package's code did run
    assert reports[0].endswith(
        "HOSTILE write-outside=PermissionError read-secret=PermissionError home-is-private=True"
        " connect-direct=ConnectionRefusedError"
    ), reports
    assert not outside.exists()
    assert not os.path.exists(tmp_path / "user-home")  # the user's HOME was never created or written


async def test_an_installer_reaches_only_the_registry_in_use(tmp_path: Path, index: tuple[str, Path]) -> None:
    """The class: *an installer led to a host that is not a registry* (an index page, a packument or a lock
    naming a file elsewhere; package code run by a build). The index links its wheel on ``example.test``:
    hostd's proxy refuses it with the reason, the parent hears it as a log line, and the PrepareError names
    the host and the registries in use. Failed before: uv reached for example.test directly (no proxy; the
    name does not resolve here: reason ``unreachable``, no such log line)."""
    need_layers("netns", "pidns")
    url, files = index
    wheel = _wheel(files, "evil_link", "")
    project = files.parent / "simple" / "evil-link"
    project.mkdir(parents=True)
    (project / "index.html").write_text(f'<a href="https://example.test/files/{wheel.name}">{wheel.name}</a>\n')
    launch = parse_package_launch("uvx", ["--from", "evil-link==1.0", "evil_link"])
    assert launch is not None
    said: list[str] = []
    with pytest.raises(PrepareError) as caught:
        await _prepare(tmp_path / "state", launch, url, said=said)
    registry = f"127.0.0.1:{_port(url)}"
    assert caught.value.reason == "host-refused"
    assert str(caught.value) == (
        f"uv pip install evil-link==1.0: uv tried to reach example.test:443, which is not one of the registries "
        f"in use ({registry})"
    )
    assert caught.value.registry == url
    assert said == [
        f"preparing evil-link==1.0 (uv, sandboxed; network: {registry} only, through hostd's proxy)",
        f"uv pip install evil-link==1.0 from {url}",
        f"log: network: refused example.test:443 (403): example.test:443 is not one of the registries in use "
        f"({registry})",
    ]
    assert not (tmp_path / "state" / "prepared" / "hostile" / launch.key).exists()


async def test_npm_led_to_a_tarball_on_another_host_is_refused(tmp_path: Path, index: tuple[str, Path]) -> None:
    """Another member: an npm mirror whose packument names the tarball on another host (``dist.tarball``, which
    npm fetches as written). The packument comes through the proxy (the mirror is the one allowed host); the
    tarball's host is refused and named. Failed before: npm went for example.test directly (``unreachable``)."""
    need_layers("netns", "pidns")
    if shutil.which("npm", path=plugin_environment()["PATH"]) is None:
        pytest.skip("npm is not on PATH")
    url, files = index
    registry = url.removesuffix("simple")
    tarball = "https://example.test/evil-tarball/-/evil-tarball-1.0.0.tgz"
    packument = {
        "name": "evil-tarball",
        "dist-tags": {"latest": "1.0.0"},
        "versions": {"1.0.0": {"name": "evil-tarball", "version": "1.0.0", "dist": {"tarball": tarball}}},
    }
    (files.parent / "evil-tarball").write_text(json.dumps(packument))
    launch = parse_package_launch("npx", ["-y", "evil-tarball@1.0.0"])
    assert launch is not None
    said: list[str] = []
    with pytest.raises(PrepareError) as caught:
        await _prepare(tmp_path / "state", launch, url, said=said, registries=Registries(npm=registry))
    mirror = f"127.0.0.1:{_port(url)}"
    assert caught.value.reason == "host-refused"
    assert str(caught.value) == (
        f"npm install evil-tarball@1.0.0: npm tried to reach example.test:443, which is not one of the registries "
        f"in use ({mirror})"
    )
    assert said[0] == f"preparing evil-tarball@1.0.0 (npm, sandboxed; network: {mirror} only, through hostd's proxy)"
    assert said[2:] == [
        f"log: network: refused example.test:443 (403): example.test:443 is not one of the registries in use ({mirror})"
    ]


async def test_an_upstream_proxy_of_hostds_environment_keeps_the_installers_network_and_says_so(
    tmp_path: Path, index: tuple[str, Path]
) -> None:
    """hostd's proxy does not chain to another: where hostd's environment names one (``HTTPS_PROXY``), the
    installer keeps today's network (that proxy) and the first progress line says the registries are not
    enforced; never silently weaker. Failed before: the line named no network at all."""
    url, files = index
    _publish(files, _wheel(files, "plain_pkg", ""), "plain-pkg")
    launch = parse_package_launch("uvx", ["--from", "plain-pkg==1.0", "plain_pkg"])
    assert launch is not None
    said: list[str] = []
    # An https proxy only: the loopback index is http://, so uv goes to it directly and the preparation works.
    prepared = await _prepare(tmp_path / "state", launch, url, said=said, environ={"HTTPS_PROXY": "http://127.0.0.1:9"})
    assert prepared.resolved == {"plain-pkg": "1.0"}
    assert said[0] == (
        "preparing plain-pkg==1.0 (uv, sandboxed; network: not filtered: hostd's environment names a proxy "
        "(HTTPS_PROXY), which the installer uses; hostd's proxy does not chain to it)"
    )
    assert "through hostd's proxy" not in " ".join(said)


# -- as an unprivileged user ------------------------------------------------------------------------


async def test_package_code_run_on_purpose_is_confined_as_nobody(index: tuple[str, Path]) -> None:
    """What the root test shows, as the user real installs run as (CI is root, whose rights differ):
    through a real hostd, the build backend's code runs in the installer's sandbox and cannot write a
    file nor read one in a folder that nobody itself owns; nobody's HOME stays empty."""
    from tests.nobody import NOBODY, nobody_folder, run_driver, skip_reason  # noqa: PLC0415

    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    need_layers("landlock-fs")  # without it the sandbox has no file rules to show
    _path()
    url, files = index
    with nobody_folder() as work:
        backend = _probe_code(work / "canary-outside", work / "secret.txt", _port(url)) + (
            "import sys\n"
            "def get_requires_for_build_wheel(config_settings=None):\n"
            "    print(_hostile_report(), file=sys.stderr)\n"
            "    raise SystemExit(1)\n"
            "build_wheel = get_requires_for_build_wheel\n"
        )
        _publish(files, _sdist(files, "evil_build", backend), "evil-build")
        driver = Path(__file__).resolve().parent.parent / "fixtures" / "sandbox" / "unprivileged_hostile_build.py"
        result = await run_driver(driver, work, url, timeout=PREPARE_TIMEOUT)
    assert result["uid"] == NOBODY
    assert (result["kind"], result["reason"]) == ("PREPARE_FAILED", "failed")
    assert result["hostile"], result
    assert result["hostile"][0].endswith(
        "HOSTILE write-outside=PermissionError read-secret=PermissionError home-is-private=True"
        " connect-direct=ConnectionRefusedError"
    )
    assert result["canary"] is False
    assert result["home"] == []
