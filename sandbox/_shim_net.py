"""The ``netproxy`` layer's shim part: the only ways out of a plugin's network namespace (issue 26).

``shim.py`` loads this file by path (as it loads the layer modules) when a spec asks for ``netproxy``, and calls
:func:`hand_off` right after it entered the plugin's user, network and pid namespaces (``pidns``), before it
forks. Inside the namespace (where it holds ``CAP_NET_ADMIN`` and may bind low ports: the user namespace owns the
network one) it opens:

- ``L``: the proxy's TCP listener on ``127.0.0.1:<port>`` (clients that read ``HTTP(S)_PROXY``);
- ``D``: a UDP socket on port 53 of each IPv4 name server ``/etc/resolv.conf`` names (at most 3, glibc's
  ``MAXNS``; none named: ``127.0.0.1``, glibc's default), each address made local first (an ``RTM_NEWADDR`` on
  ``lo`` over route netlink; ``127.0.0.0/8`` is local already): hostd answers every name with a fake address
  (``hostd/net/dns.py``);
- the fake range ``198.18.0.0/15`` as one address block on ``lo`` (the kernel then treats every address in it
  as local);
- ``T``: a TCP listener on ``0.0.0.0:<port>`` for each port of ``proxy["ports"]`` (80, 443 and the ports the
  allowlist names; sandbox/netns.py caps them): a client that resolved a name to a fake address and connects
  lands there, and hostd maps the address back to the name.

It passes them all (``SCM_RIGHTS``, one kind letter per descriptor, in order) over the pathname Unix socket hostd
listens on (a folder only hostd's user can open: ``0700``), then closes its own copies. hostd serves them from
then on; no byte passes through the shim. They are open before the plugin runs, so a connection or a query at
start-up waits in a backlog rather than failing. The plugin itself cannot open a Unix socket (``seccomp-net``)
nor reach anything but its namespace's own addresses. Stdlib only.
"""

from __future__ import annotations

import array
import errno
import ipaddress
import socket
import struct
import types
from typing import Any

#: ``shim.py`` itself, set by ``shim.load_sibling`` right after this file is loaded.
shim = types.ModuleType("shim")  # a placeholder until then

#: The fake addresses hostd's DNS answers with (hostd/net/dns.py ``FAKE_NETWORK``; RFC 2544).
FAKE_BLOCK = ("198.18.0.1", 15)
#: glibc reads at most 3 name servers (``MAXNS``).
MAX_NAMESERVERS = 3
_RTM_NEWADDR, _NLM_F_REQUEST, _NLM_F_ACK, _NLM_F_CREATE, _NLMSG_ERROR = 20, 1, 4, 0x400, 2
_IFA_ADDRESS, _IFA_LOCAL, _RT_SCOPE_HOST = 1, 2, 254


def nameservers(path: str = "/etc/resolv.conf") -> list[str]:
    """The IPv4 name servers of ``path`` (``nameserver`` lines, at most :data:`MAX_NAMESERVERS`, in order);
    ``["127.0.0.1"]`` when it names none or cannot be read (glibc's default)."""
    found: list[str] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read(65536).splitlines()
    except OSError:
        lines = []
    for line in lines:
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver":
            try:
                address = ipaddress.ip_address(words[1])
            except ValueError:
                continue
            if isinstance(address, ipaddress.IPv4Address) and not address.is_unspecified:
                found.append(str(address))
    found = list(dict.fromkeys(found))[:MAX_NAMESERVERS]
    return found or ["127.0.0.1"]


def add_loopback_address(address: str, prefix: int) -> None:
    """Add ``address/prefix`` to ``lo`` (route netlink ``RTM_NEWADDR``, scope host); an address already there
    is fine. Raises ``OSError`` with the kernel's errno."""
    index = socket.if_nametoindex("lo")
    packed = socket.inet_aton(address)
    attrs = b"".join(struct.pack("HH", 8, kind) + packed for kind in (_IFA_LOCAL, _IFA_ADDRESS))
    body = struct.pack("BBBBI", socket.AF_INET, prefix, 0, _RT_SCOPE_HOST, index) + attrs
    flags = _NLM_F_REQUEST | _NLM_F_ACK | _NLM_F_CREATE
    message = struct.pack("IHHII", 16 + len(body), _RTM_NEWADDR, flags, 1, 0) + body
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as sock:
        sock.settimeout(10.0)
        sock.sendto(message, (0, 0))
        reply = sock.recv(65536)
    if len(reply) >= 20 and struct.unpack_from("H", reply, 4)[0] == _NLMSG_ERROR:
        code = -struct.unpack_from("i", reply, 16)[0]
        if code not in (0, errno.EEXIST):
            raise OSError(code, f"RTM_NEWADDR {address}/{prefix} on lo: {errno.errorcode.get(code, code)}")


def _open(proxy: dict[str, Any]) -> tuple[bytes, list[socket.socket]]:
    """The kinds and sockets of :func:`hand_off` (module text); closes what it opened when it raises. When
    transparent mode cannot be set up (a kernel or a container refusing an address or a bind), the proxy listener
    goes alone, the kinds followed by ``\\0`` and the reason: hostd says so; nothing gets a route out either way."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", int(proxy["port"])))
        listener.listen(128)
    except BaseException:
        listener.close()
        raise
    ports = [int(p) for p in proxy.get("ports") or ()]
    if not ports:
        return b"L", [listener]
    try:
        kinds, opened = _open_transparent(ports)
    except OSError as exc:
        reason = f"{exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")
        return b"L\0" + reason.encode("utf-8", "replace")[:200], [listener]
    return b"L" + kinds, [listener, *opened]


def _open_transparent(ports: list[int]) -> tuple[bytes, list[socket.socket]]:
    """Transparent mode's addresses and sockets (module text); closes what it opened when it raises."""
    kinds, opened = bytearray(), []
    try:
        add_loopback_address(*FAKE_BLOCK)
        for server in nameservers():
            if not ipaddress.IPv4Address(server).is_loopback:
                add_loopback_address(server, 32)
            udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            opened.append(udp)
            try:
                udp.bind((server, 53))
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, f"{server}:53") from None
            kinds += b"D"
        for port in ports:
            tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            opened.append(tcp)
            tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                tcp.bind(("0.0.0.0", port))
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, f"0.0.0.0:{port}") from None
            tcp.listen(128)
            kinds += b"T"
    except BaseException:
        for sock in opened:
            sock.close()
        raise
    return bytes(kinds), opened


def hand_off(proxy: dict[str, Any]) -> None:
    """Open the namespace's ways out (module text: ``proxy["port"]`` for the proxy, ``proxy["ports"]`` for the
    transparent listeners, none: the proxy alone) and send them to the Unix socket at ``proxy["socket"]``.
    Raises ``OSError`` (the launch then fails with ``error netproxy ...``: never a plugin with a route out and
    no proxy)."""
    kinds, opened = _open(proxy)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as channel:
            channel.settimeout(10.0)
            channel.connect(str(proxy["socket"]))
            fds = array.array("i", [sock.fileno() for sock in opened])
            channel.sendmsg([kinds], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds.tobytes())])
    finally:
        for sock in opened:
            sock.close()
