"""The network allowlist's grammar and matcher (hostd/net/allowlist.py; issue 26). Sans-IO: no sockets here.

The class under test: *two spellings of one destination* (case, trailing dot, IDNA, numeric IPv4 forms,
IPv4-mapped IPv6) must match the same entries or be refused, never slip past a rule written for the other
spelling; and every entry is attacker input, refused with a reason when outside the grammar.
"""

from __future__ import annotations

import pytest

from hostd.net.allowlist import (
    DEFAULT_PORTS,
    MAX_ENTRIES,
    Allowlist,
    EntryError,
    address_kind,
    addresses_problem,
    canonical_host,
    parse_entry,
)


@pytest.mark.parametrize(
    ("spelling", "canonical"),
    [
        ("API.Example.COM", "api.example.com"),
        ("api.example.com.", "api.example.com"),
        ("bücher.example", "xn--bcher-kva.example"),
        ("BÜCHER.example.", "xn--bcher-kva.example"),
        ("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ("example\u3002com", "example.com"),  # an ideographic full stop is a dot under UTS 46
        ("127.0.0.1", "127.0.0.1"),
        ("[::1]", "::1"),
        ("::FFFF:127.0.0.1", "127.0.0.1"),
        ("[0:0:0:0:0:0:0:1]", "::1"),
    ],
)
def test_one_spelling_per_host(spelling: str, canonical: str) -> None:
    assert canonical_host(spelling)[0] == canonical


@pytest.mark.parametrize(
    "spelling",
    ["127.1", "2130706433", "0x7f.0.0.1", "0177.0.0.1", "010.0.0.1", "1.2.3.4.5", "example.0x10", "a.b.123"],
)
def test_numeric_forms_resolvers_read_as_addresses_are_refused(spelling: str) -> None:
    with pytest.raises(EntryError, match="four decimal parts"):
        canonical_host(spelling)


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("", "name or an address"),
        ("exa mple.com", "name or an address"),
        ("example.com\x00", "name or an address"),
        ("a..example.com", "1 to 63"),
        ("-a.example.com", "1 to 63"),
        ("a_b.example.com", "1 to 63"),
        ("a" * 64 + ".com", "1 to 63"),
        (".".join(["a" * 60] * 4) + ".abcdefghij", "253"),
        ("xn--zz.example", "not valid IDNA"),
        ("*", "'\\*' may only start"),
        ("*.com", "two labels"),
        ("a.*.example.com", "'\\*' may only start"),
        ("*example.com", "'\\*' may only start"),
        ("*.127.0.0.1", "domain, not an address"),
        ("https://example.com", "not a URL"),
        ("user@example.com", "not a URL"),
        ("example.com/path", "not a URL"),
        ("example.com:0", "1 to 65535"),
        ("example.com:65536", "1 to 65535"),
        ("example.com:0443", "1 to 65535"),
        ("example.com:+443", "1 to 65535"),
        ("example.com:", "1 to 65535"),
        ("::1", "brackets"),
        ("[::1", "must close"),
        ("[::1]x", "only ':PORT'"),
        ("[fe80::1%eth0]", "not a URL"),
        ("[example.com]", "IPv6 address only"),
        ("x" * 300, "at most"),
    ],
)
def test_entries_outside_the_grammar_are_refused_with_a_reason(entry: str, why: str) -> None:
    with pytest.raises(EntryError, match=why):
        parse_entry(entry)


def test_an_entry_that_is_no_string_is_refused() -> None:
    with pytest.raises(EntryError, match="zone id"):
        canonical_host("fe80::1%eth0")  # a requested host (CONNECT [fe80::1%eth0]:443) never matches
    with pytest.raises(EntryError, match="a string, not int"):
        parse_entry(443)


def test_canonical_texts_and_default_ports() -> None:
    entries = [parse_entry(t) for t in ("API.example.com.", "*.Example.org:8443", "[::1]:9000", "10.0.0.7")]
    assert [e.text for e in entries] == ["api.example.com", "*.example.org:8443", "[::1]:9000", "10.0.0.7"]
    assert [e.ports for e in entries] == [DEFAULT_PORTS, (8443,), (9000,), (80, 443)]


def test_matching_exact_wildcard_ports_and_addresses() -> None:
    allow = Allowlist.parse(["api.example.com", "*.example.org:8443", "127.0.0.1:9000", "[::1]"])
    found = {
        (host, port): (entry.text if (entry := allow.match(host, port)) else None)
        for host, port in [
            ("api.example.com", 443),
            ("API.EXAMPLE.COM.", 80),
            ("api.example.com", 8443),  # not a default port
            ("x.api.example.com", 443),  # an exact entry does not cover names below it
            ("a.example.org", 8443),
            ("a.b.example.org", 8443),
            ("example.org", 8443),  # a wildcard covers names below the domain only
            ("evilexample.org", 8443),
            ("a.example.org", 443),
            ("127.0.0.1", 9000),
            ("::ffff:127.0.0.1", 9000),
            ("127.0.0.1", 9001),
            ("localhost", 9000),  # a name is not the address it may resolve to
            ("::1", 443),
            ("0:0::1", 80),
            ("api.example.com.evil.net", 443),
        ]
    }
    assert found == {
        ("api.example.com", 443): "api.example.com",
        ("API.EXAMPLE.COM.", 80): "api.example.com",
        ("api.example.com", 8443): None,
        ("x.api.example.com", 443): None,
        ("a.example.org", 8443): "*.example.org:8443",
        ("a.b.example.org", 8443): "*.example.org:8443",
        ("example.org", 8443): None,
        ("evilexample.org", 8443): None,
        ("a.example.org", 443): None,
        ("127.0.0.1", 9000): "127.0.0.1:9000",
        ("::ffff:127.0.0.1", 9000): "127.0.0.1:9000",
        ("127.0.0.1", 9001): None,
        ("localhost", 9000): None,
        ("::1", 443): "[::1]",
        ("0:0::1", 80): "[::1]",
        ("api.example.com.evil.net", 443): None,
    }


def test_a_requested_host_outside_the_grammar_matches_nothing() -> None:
    allow = Allowlist.parse(["127.0.0.1"])
    for host in ("2130706433", "127.1", "0x7f000001", "a b"):
        with pytest.raises(EntryError):
            allow.match(host, 443)


def test_an_empty_allowlist_allows_nothing() -> None:
    assert Allowlist().match("example.com", 443) is None
    assert Allowlist().exact_names(443) == []


def test_too_many_entries_and_private_addresses_are_refused() -> None:
    with pytest.raises(EntryError, match=f"at most {MAX_ENTRIES}"):
        Allowlist.parse([f"h{i}.example.com" for i in range(MAX_ENTRIES + 1)])
    with pytest.raises(EntryError, match="name hosts here"):
        Allowlist.parse(["127.0.0.1"], private=["127.0.0.1"])


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("93.184.215.14", None),
        ("2606:4700::1111", None),
        ("127.0.0.1", "loopback"),
        ("127.9.9.9", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("64:ff9b::7f00:1", "loopback"),
        ("10.1.2.3", "private"),
        ("192.168.1.1", "private"),
        ("172.16.0.1", "private"),
        ("100.64.0.1", "private"),
        ("fd00::1", "private"),
        ("fec0::1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("2002:a9fe:a9fe::", "link-local"),
        ("224.0.0.1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
    ],
)
def test_address_kinds(address: str, kind: str | None) -> None:
    assert address_kind(address) == kind


def test_a_listed_name_reaches_a_private_address_only_when_named_in_private() -> None:
    allow = Allowlist.parse(["api.example.com", "vault.test:8200", "127.0.0.1:9000"], private=["vault.test"])
    assert addresses_problem("api.example.com", ["93.184.215.14"], allow) is None
    assert addresses_problem("api.example.com", ["93.184.215.14", "127.0.0.1"], allow) == (
        "api.example.com resolves to the loopback address 127.0.0.1; a plugin reaches a loopback address only "
        "when its allowlist names the host in network.private, or names the address itself"
    )
    assert addresses_problem("api.example.com", ["::ffff:10.0.0.1"], allow) is not None
    assert addresses_problem("VAULT.test.", ["127.0.0.1"], allow) is None
    assert addresses_problem("127.0.0.1", ["127.0.0.1"], allow) is None  # an address entry is explicit
    assert addresses_problem("api.example.com", [], allow) == "api.example.com resolves to no address"
