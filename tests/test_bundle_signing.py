"""MCPB bundle signatures: bundles signed here exactly as `mcpb sign` does, checked against a trust root.

`mcpb sign` (modelcontextprotocol/mcpb src/node/sign.ts) signs the whole file with a detached PKCS#7
SignedData (SHA-256; signed attributes contentType, messageDigest, signingTime; the signing certificate
first, then intermediates) and appends MCPB_SIG_V1 <u32 LE length> <DER> MCPB_SIG_END. The builder below
does the same with `cryptography` (NoCapabilities: forge adds no SMIMECapabilities attribute).
"""

from __future__ import annotations

import datetime
import json
import struct
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs7
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from hostd.install import bundle
from hostd.wire.errors import HostError
from tests.test_bundle import NODE, mcpb_manifest, node_bundle

Key = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
NOW = datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class Identity:
    certificate: x509.Certificate
    key: Key


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "hostd tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


_KEY_USAGES = (
    "digital_signature",
    "content_commitment",
    "key_encipherment",
    "data_encipherment",
    "key_agreement",
    "key_cert_sign",
    "crl_sign",
    "encipher_only",
    "decipher_only",
)


def _usage(*, signs_certificates: bool) -> x509.KeyUsage:
    wanted = {"key_cert_sign", "crl_sign"} if signs_certificates else {"digital_signature"}
    return x509.KeyUsage(**{name: name in wanted for name in _KEY_USAGES})


def issue(
    common_name: str,
    issuer: Identity | None = None,
    *,
    ca: bool = False,
    purposes: tuple[x509.ObjectIdentifier, ...] = (ExtendedKeyUsageOID.CODE_SIGNING,),
    key: Key | None = None,
) -> Identity:
    """A certificate for ``common_name`` signed by ``issuer`` (self-signed when None)."""
    key = key or rsa.generate_private_key(public_exponent=65537, key_size=2048)
    signer_key = issuer.key if issuer else key
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(issuer.certificate.subject if issuer else _name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - datetime.timedelta(days=1))
        .not_valid_after(NOW + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(_usage(signs_certificates=ca), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signer_key.public_key()), critical=False)
    )
    if not ca:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(purposes)), critical=False)
    return Identity(builder.sign(signer_key, hashes.SHA256()), key)


def sign_block(content: bytes, signer: Identity, intermediates: tuple[Identity, ...] = ()) -> bytes:
    """The signature block `mcpb sign` appends to ``content``."""
    builder = (
        pkcs7.PKCS7SignatureBuilder().set_data(content).add_signer(signer.certificate, signer.key, hashes.SHA256())
    )
    for extra in intermediates:
        builder = builder.add_certificate(extra.certificate)
    der = builder.sign(
        serialization.Encoding.DER,
        [pkcs7.PKCS7Options.DetachedSignature, pkcs7.PKCS7Options.Binary, pkcs7.PKCS7Options.NoCapabilities],
    )
    return bundle.SIGNATURE_HEADER + struct.pack("<I", len(der)) + der + bundle.SIGNATURE_FOOTER


def sign_file(path: Path, signer: Identity, intermediates: tuple[Identity, ...] = ()) -> Path:
    content = path.read_bytes()
    path.write_bytes(content + sign_block(content, signer, intermediates))
    return path


def pem(tmp_path: Path, *identities: Identity) -> str:
    path = tmp_path / "trust.pem"
    path.write_bytes(b"".join(i.certificate.public_bytes(serialization.Encoding.PEM) for i in identities))
    return str(path)


@pytest.fixture(scope="module")
def ca() -> Identity:
    return issue("Test CA", ca=True)


@pytest.fixture(scope="module")
def publisher(ca: Identity) -> Identity:
    return issue("Test Publisher", ca)


def refusal(path: Path, roots: tuple[str, ...] = ()) -> dict[str, Any]:
    with pytest.raises(HostError) as refused:
        bundle.read_bundle(path, trust_roots=roots)
    assert refused.value.kind.name == "PACKAGE_INVALID"
    data = dict(refused.value.data)
    assert data["errors"] == [
        {"field": "signature", "message": refused.value.message.removeprefix("bundle signature: ")}
    ]
    return {"reason": data["reason"], "message": refused.value.message}


def test_unsigned_and_unverified_without_trust_root(tmp_path: Path, publisher: Identity) -> None:
    path = node_bundle(tmp_path)
    unsigned = bundle.read_bundle(path)
    assert (unsigned.signature, unsigned.checked.signer) == ("unsigned", None)
    content = path.read_bytes()
    sign_file(path, publisher)
    read = bundle.read_bundle(path)
    assert (read.signature, read.checked.signer) == ("unverified", None)
    assert read.archive == content


def test_valid_chains_are_verified(tmp_path: Path, ca: Identity, publisher: Identity) -> None:
    roots = (pem(tmp_path, ca),)
    direct = sign_file(node_bundle(tmp_path), publisher)
    read = bundle.read_bundle(direct, trust_roots=roots)
    assert (read.signature, read.checked.signer) == ("verified", "CN=Test Publisher,O=hostd tests")

    intermediate = issue("Test Intermediate", ca, ca=True)
    leaf = issue("Chained Publisher", intermediate, key=ec.generate_private_key(ec.SECP256R1()))
    chained = sign_file(node_bundle(tmp_path), leaf, (intermediate,))
    read = bundle.read_bundle(chained, trust_roots=roots)
    assert (read.signature, read.checked.signer) == ("verified", "CN=Chained Publisher,O=hostd tests")
    # Without the intermediate in the signature, the chain cannot be built.
    missing = node_bundle(tmp_path)
    sign_file(missing, leaf)
    assert refusal(missing, roots)["reason"] == "signer-untrusted"


def test_signers_outside_the_trust_root_are_refused(tmp_path: Path, ca: Identity, publisher: Identity) -> None:
    roots = (pem(tmp_path, ca),)
    self_signed = sign_file(node_bundle(tmp_path), issue("Test Publisher"))
    assert refusal(self_signed, roots) == {
        "reason": "signer-untrusted",
        "message": "bundle signature: the signer CN=Test Publisher,O=hostd tests, issued by CN=Test Publisher,"
        "O=hostd tests, does not chain to a trust root certificate for code signing (validation failed: "
        "candidates exhausted: all candidates exhausted with no interior errors)",
    }
    other_ca = issue("Other CA", ca=True)
    elsewhere = sign_file(node_bundle(tmp_path), issue("Other Publisher", other_ca))
    assert refusal(elsewhere, roots)["reason"] == "signer-untrusted"
    tls_only = sign_file(node_bundle(tmp_path), issue("TLS Server", ca, purposes=(ExtendedKeyUsageOID.SERVER_AUTH,)))
    refused = refusal(tls_only, roots)
    assert refused["reason"] == "signer-untrusted"
    assert "extended key usage does not include codeSigning" in refused["message"]
    # The same signer as above is trusted: only the chain decides.
    assert bundle.read_bundle(sign_file(node_bundle(tmp_path), publisher), trust_roots=roots).signature == "verified"


def test_tampered_archives_are_refused_with_or_without_trust_root(
    tmp_path: Path, ca: Identity, publisher: Identity
) -> None:
    path = node_bundle(tmp_path)
    content = path.read_bytes()
    block = sign_block(content, publisher)
    index = content.rindex(b"index.js")  # the central directory's name of the server: one byte changed
    tampered = content[:index] + b"I" + content[index + 1 :]
    path.write_bytes(tampered + block)
    expected = {
        "reason": "signature-mismatch",
        "message": "bundle signature: the archive does not match its signature: changed after signing",
    }
    assert refusal(path) == expected
    assert refusal(path, (pem(tmp_path, ca),)) == expected
    # A signature of another archive (a block moved from one bundle to another).
    other = node_bundle(tmp_path, version="9.9.9").read_bytes()
    path.write_bytes(other + block)
    assert refusal(path) == expected


def test_cut_or_extended_blocks_are_refused(tmp_path: Path, publisher: Identity) -> None:
    path = node_bundle(tmp_path)
    content = path.read_bytes()
    block = sign_block(content, publisher)
    length = len(block) - len(bundle.SIGNATURE_HEADER) - 4 - len(bundle.SIGNATURE_FOOTER)
    cases = {
        "cut in the signature": (block[:200], f"{200 - 15} bytes follow"),
        "cut before the footer": (block[: -len(bundle.SIGNATURE_FOOTER)], f"{length} bytes follow"),
        "cut in the length": (block[:13], "truncated before its length"),
        "a byte after the footer": (block + b"\n", f"{length + 13} bytes follow"),
        "a footer without a block": (bundle.SIGNATURE_FOOTER, "no MCPB_SIG_V1 block follows the archive"),
        "a garbage signature": (
            bundle.SIGNATURE_HEADER + struct.pack("<I", 9) + b"not PKCS7" + bundle.SIGNATURE_FOOTER,
            "not a PKCS#7 SignedData",
        ),
    }
    for name, (tail, words) in cases.items():
        path.write_bytes(content + tail)
        refused = refusal(path)
        assert refused["reason"] == "signature-malformed", name
        assert words in refused["message"], (name, refused["message"])


def test_marker_bytes_inside_the_archive_are_not_a_block(tmp_path: Path) -> None:
    # A bundle that ships a file holding the markers (mcpb's own source, say) is not "signed".
    marker = bundle.SIGNATURE_HEADER + struct.pack("<I", 3) + b"abc" + bundle.SIGNATURE_FOOTER
    files = {"server/index.js": (NODE / "server.js").read_bytes(), "docs/sign.txt": marker}
    with zipfile.ZipFile(tmp_path / "stored.mcpb", "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("manifest.json", json.dumps(mcpb_manifest()))
        for name, data in files.items():
            archive.writestr(name, data)
        archive.comment = marker  # the archive's own comment, too
    assert marker in (tmp_path / "stored.mcpb").read_bytes()
    assert bundle.read_bundle(tmp_path / "stored.mcpb").signature == "unsigned"


async def test_install_over_the_wire_reports_and_refuses(tmp_path: Path, ca: Identity, publisher: Identity) -> None:
    good = sign_file(node_bundle(tmp_path), publisher)
    async with HostdClient.spawn(
        ["--state-dir", str(tmp_path / "state"), "--bundle-trust-root", pem(tmp_path, ca)], env=plugin_environment()
    ) as client:
        info = await client.request("plugins/install", {"path": str(good)})
        assert info["origin"] == {
            "kind": "mcpb",
            "source": str(good),
            "sha256": info["origin"]["sha256"],
            "signature": "verified",
            "signer": "CN=Test Publisher,O=hostd tests",
        }
        await client.request("plugins/uninstall", {"id": "node-echo"})
        stranger = sign_file(node_bundle(tmp_path), issue("Stranger"))
        with pytest.raises(RpcError) as refused:
            await client.request("plugins/install", {"path": str(stranger)})
        assert refused.value.kind == "PACKAGE_INVALID"
        assert refused.value.data["reason"] == "signer-untrusted"
        assert refused.value.message.startswith(
            "bundle signature: the signer CN=Stranger,O=hostd tests, issued by CN=Stranger,O=hostd tests, does not "
            "chain to a trust root certificate for code signing ("
        )
        listed = await client.request("plugins/list", {})
        assert listed["plugins"] == []
    assert sorted(p.name for p in (tmp_path / "state" / "bundles").iterdir()) == []


def test_an_unusable_trust_root_fails_at_start(tmp_path: Path) -> None:
    empty = tmp_path / "empty.pem"
    empty.write_text("no certificate here\n")
    done = subprocess.run(
        [sys.executable, "-m", "hostd", "serve", "--state-dir", str(tmp_path / "s"), "--bundle-trust-root", str(empty)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert f"--bundle-trust-root: {empty}: no PEM certificate could be read" in done.stderr
