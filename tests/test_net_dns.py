"""hostd/net/dns.py, the fake-address DNS of transparent mode (issue 26): every query is the plugin's bytes.

The class closed: a malformed query that reaches past the parser (an exception, a loop, an unbounded name).
Members tested with their exact answers: truncation at each place, a compression pointer (a loop to itself), a
label over 63 octets, a name over 255 octets, question counts 0 and 2, a packet over 512 bytes, a response (QR
set), an unknown opcode or class, octets no host name has; then mutations of a good query, none of which raises.
"""

from __future__ import annotations

import random
import struct

from hostd.net.dns import FakeNames, parse_query, respond

ASKED: list[tuple[str, int]] = []


def allowed(name: str, qtype: int) -> bool:
    ASKED.append((name, qtype))
    return name == "api.test" or name.endswith(".example.com")


def query(name: bytes = b"\x03api\x04test\x00", qtype: int = 1, *, qd: int = 1, flags: int = 0x0100) -> bytes:
    return struct.pack("!HHHHHH", 0xBEEF, flags, qd, 0, 0, 0) + name + struct.pack("!HH", qtype, 1)


def header(rcode: int, qd: int = 0, an: int = 0, flags: int = 0x0100) -> bytes:
    """An answer's header for query 0xBEEF: QR, AA, RA, the query's RD and opcode, ``rcode``."""
    return struct.pack("!HHHHHH", 0xBEEF, 0x8000 | 0x0400 | 0x0080 | flags | rcode, qd, an, 0, 0)


QUESTION_A = b"\x03api\x04test\x00\x00\x01\x00\x01"


def test_answers_a_with_a_fake_address_and_aaaa_and_others_with_nothing() -> None:
    names = FakeNames()
    a = respond(query(), names, allowed)
    assert a == header(0, 1, 1) + QUESTION_A + bytes.fromhex("c00c 0001 0001 00000005 0004 c6120001")
    assert respond(query(b"\x03API\x04Test\x00"), names, allowed) == (
        header(0, 1, 1) + b"\x03API\x04Test\x00\x00\x01\x00\x01" + bytes.fromhex("c00c00010001000000050004c6120001")
    )  # one name whatever the letter case: the same address
    assert respond(query(qtype=28), names, allowed) == header(0, 1) + b"\x03api\x04test\x00\x00\x1c\x00\x01"
    assert respond(query(qtype=15), names, allowed) == header(0, 1) + b"\x03api\x04test\x00\x00\x0f\x00\x01"
    other = b"\x05other\x04test\x00"
    assert respond(query(other), names, allowed) == header(3, 1) + other + b"\x00\x01\x00\x01"
    assert names.name_for("198.18.0.1") == "api.test"
    assert names.name_for("198.18.0.2") is None


def test_malformed_queries_get_formerr_or_nothing_and_never_reach_the_allowlist() -> None:
    names = FakeNames()
    ASKED.clear()
    formerr = header(1)
    cases: list[tuple[bytes, bytes | None]] = [
        (b"", None),
        (b"\xbe\xef\x01\x00\x00\x01\x00\x00\x00\x00\x00", None),  # 11 bytes: no header, no id to answer
        (query(flags=0x8100), None),  # a response: never answered
        (query()[:12], formerr),  # no question at all
        (query()[:16], formerr),  # inside a label
        (query()[:22], formerr),  # before type and class
        (query()[:-1], formerr),  # inside the class
        (query(b"\xc0\x0c"), formerr),  # a pointer to the name itself: a loop
        (query(b"\x03api\xc0\x0c"), formerr),  # a pointer after a label
        (query(b"\x40" + b"a" * 64 + b"\x00"), formerr),  # a 64-octet label (an extended label type)
        (query(b"\x80" + b"a" * 10 + b"\x00"), formerr),  # the reserved label type
        (query((b"\x3f" + b"a" * 63) * 4 + b"\x00"), formerr),  # 4 x 63: 257 octets with the length octets
        (query(qd=0), formerr),
        (query(qd=2), formerr),
        (query() + b"\x00" * 500, formerr),  # over 512 bytes
        (query(flags=0x1100), header(4, flags=0x1100)),  # opcode 2 (STATUS): NOTIMP
        (query()[:-2] + b"\x00\x03", header(4)),  # class CH: NOTIMP
    ]
    for packet, expected in cases:
        assert respond(packet, names, allowed) == expected, packet
    assert ASKED == []  # nothing malformed reached the allowlist
    longest = (b"\x3f" + b"a" * 63) * 3 + b"\x3d" + b"a" * 61 + b"\x00"  # 255 octets: taken
    assert parse_query(query(longest)).name == ".".join(["a" * 63] * 3 + ["a" * 61])
    odd = b"\x03a\xffb\x04test\x00"  # an octet no host name has: NXDOMAIN, the allowlist not asked
    assert respond(query(odd), names, allowed) == header(3, 1) + odd + b"\x00\x01\x00\x01"
    assert ASKED == []
    assert len(names) == 0


def test_mutated_queries_never_raise() -> None:
    rng = random.Random(26)
    names = FakeNames()
    good = query(b"\x03www\x07example\x03com\x00")
    for _ in range(3000):
        packet = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            kind = rng.random()
            if kind < 0.5 and packet:
                packet[rng.randrange(len(packet))] = rng.randrange(256)
            elif kind < 0.75:
                del packet[rng.randrange(len(packet) + 1) :]
            else:
                packet[rng.randrange(len(packet) + 1) : 0] = rng.randbytes(rng.randint(1, 8))
        reply = respond(bytes(packet), names, allowed)
        assert reply is None or (reply[:2] == packet[:2] and reply[2] & 0x80)
    assert len(names) <= 3000


def test_the_table_recycles_the_name_answered_least_recently() -> None:
    names = FakeNames(capacity=2)
    assert [names.address_for(n) for n in ("a.test", "b.test", "a.test")] == ["198.18.0.1", "198.18.0.2", "198.18.0.1"]
    assert names.address_for("c.test") == "198.18.0.2"  # b.test was answered least recently
    assert (names.name_for("198.18.0.2"), names.name_for("198.18.0.1"), len(names)) == ("c.test", "a.test", 2)
