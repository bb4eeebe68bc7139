"""MCPB bundle signatures: the block ``mcpb sign`` appends, checked as ``mcpb verify`` does, against a trust root.

Theory of operation
-------------------
``mcpb sign`` (modelcontextprotocol/mcpb, ``src/node/sign.ts``) signs the
whole ``.mcpb`` file as it is (the ZIP archive) with a detached PKCS#7 /
CMS ``SignedData`` (RFC 5652): SHA-256, the signed attributes
``contentType`` (``data``), ``messageDigest`` and ``signingTime``, the
signing certificate first and any intermediates after it. It then appends
the block::

    b"MCPB_SIG_V1" <u32 little-endian length N> <N bytes: the DER SignedData> b"MCPB_SIG_END"

``mcpb verify`` checks the signature over the signed attributes, that
``messageDigest`` is the digest of the archive, and the signer's chain
against the system's trust store with the code-signing purpose.

:func:`split_block` finds the block: it starts right where the archive's
end-of-central-directory record (and its comment) ends, and must run to the
end of the file with the length it declares. The class of fault it closes:
*a block that is there but cannot be read whole* (truncated, a length that
does not match, bytes after the footer, a footer with no block): each is
refused (``signature-malformed``), never read as "unsigned", so cutting a
signature off does not downgrade a signed bundle to an unsigned one that
installs silently.

:func:`verify` then checks the ``SignedData`` whatever the configuration
(a signature that does not match the archive means the file was changed
after signing: ``signature-mismatch``, refused), and its signer's chain
when a trust root is configured (``hostd serve --bundle-trust-root``): a
chain that does not lead to one of its certificates, with the code-signing
purpose (extended key usage ``codeSigning`` when the leaf restricts it, key
usage ``digitalSignature``), at the current time, is ``signer-untrusted``.
Each refusal is ``PACKAGE_INVALID`` with ``data.reason`` and
``data.errors[{field: "signature", message}]``.

States reported in ``origin.signature``: ``unsigned`` (no block),
``unverified`` (a signature that matches the archive, no trust root
configured), ``verified`` (its chain leads to the trust root; the signer's
subject, RFC 4514, in ``origin.signer``).
"""

from __future__ import annotations

import datetime
import hashlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from hostd.wire.errors import ErrorKind, HostError

__all__ = [
    "SIGNATURE_FOOTER",
    "SIGNATURE_HEADER",
    "Signature",
    "load_trust_roots",
    "split_block",
    "verify",
]

SIGNATURE_HEADER: Final = b"MCPB_SIG_V1"
SIGNATURE_FOOTER: Final = b"MCPB_SIG_END"
_EOCD: Final = b"PK\x05\x06"
_EOCD_SIZE: Final = 22
MAX_SIGNATURE_BYTES: Final = 1024 * 1024
"""Largest PKCS#7 block read (1 MiB; a chain of a few certificates is a few KiB)."""

Reason = Literal["signature-malformed", "signature-mismatch", "signer-untrusted", "trust-root-unusable"]


@dataclass(frozen=True)
class Signature:
    """A bundle's signature as checked: ``state`` and, when ``verified``, the signer's RFC 4514 subject."""

    state: Literal["unsigned", "unverified", "verified"]
    signer: str | None = None


def refused(reason: Reason, message: str) -> HostError:
    """``PACKAGE_INVALID`` for a signature problem: ``data.reason`` and one ``data.errors`` entry."""
    return HostError(
        ErrorKind.PACKAGE_INVALID,
        f"bundle signature: {message}",
        reason=reason,
        errors=[{"field": "signature", "message": message}],
    )


def _archive_ends_at(data: bytes, position: int) -> bool:
    """Whether a ZIP end-of-central-directory record, with its comment, ends exactly at ``position``."""
    lowest = max(0, position - _EOCD_SIZE - 0xFFFF)
    record = data.rfind(_EOCD, lowest, position - _EOCD_SIZE + len(_EOCD))
    while record != -1:
        (comment,) = struct.unpack_from("<H", data, record + 20)
        if record + _EOCD_SIZE + comment == position:
            return True
        record = data.rfind(_EOCD, lowest, record)
    return False


_MAX_CANDIDATES: Final = 8
"""How many ``MCPB_SIG_V1`` occurrences, from the end, may be tried as the block's start. Each try scans up to
64 KiB for the end record, so trying every one made a file of repeated markers cost ~12 s of CPU per MiB
(quadratic). A real block's header is the last occurrence unless its own DER repeats the marker, which only a
crafted signature does; past the cap the file reads as unsigned, which is what not signing it would give."""


def _block_start(data: bytes) -> int:
    """Where a signature block starts: right after the archive's end record and comment; -1 when none does
    among the last :data:`_MAX_CANDIDATES` markers."""
    start = data.rfind(SIGNATURE_HEADER)
    for _ in range(_MAX_CANDIDATES):
        if start == -1:
            return -1
        if _archive_ends_at(data, start):
            return start
        start = data.rfind(SIGNATURE_HEADER, 0, start)
    return -1


def split_block(data: bytes) -> tuple[bytes, bytes | None]:
    """``(archive, DER SignedData)`` of a bundle file's bytes; ``(data, None)`` when it has no signature block.

    Raises ``PACKAGE_INVALID`` (``signature-malformed``) for a block that is
    there but not whole (see the module docstring). Pure, no I/O.
    """
    start = _block_start(data)
    if start == -1:
        if data.endswith(SIGNATURE_FOOTER) and not _archive_ends_at(data, len(data)):
            raise refused(
                "signature-malformed", "the file ends with MCPB_SIG_END but no MCPB_SIG_V1 block follows the archive"
            )
        return data, None
    block = memoryview(data)[start + len(SIGNATURE_HEADER) :]
    if len(block) < 4:
        raise refused("signature-malformed", "the block is truncated before its length")
    (length,) = struct.unpack_from("<I", block)
    if length > MAX_SIGNATURE_BYTES:
        raise refused("signature-malformed", f"the block declares {length} bytes; at most {MAX_SIGNATURE_BYTES}")
    rest = len(block) - 4
    if rest != length + len(SIGNATURE_FOOTER):
        raise refused(
            "signature-malformed",
            f"the block declares {length} bytes of signature and MCPB_SIG_END; {rest} bytes follow "
            f"(expected {length + len(SIGNATURE_FOOTER)}: truncated or extended)",
        )
    if bytes(block[4 + length :]) != SIGNATURE_FOOTER:
        raise refused("signature-malformed", "the block does not end with MCPB_SIG_END")
    return data[:start], bytes(block[4 : 4 + length])


def load_trust_roots(paths: Sequence[str]) -> list[Any]:
    """The certificates (``cryptography.x509.Certificate``) of the PEM files ``paths``, in order.

    Raises ``ValueError`` naming the file for one that cannot be read or holds no certificate. Blocking.
    """
    from cryptography import x509  # noqa: PLC0415 - only signed bundles and the flag's check pay for it

    roots: list[Any] = []
    for path in paths:
        try:
            found = x509.load_pem_x509_certificates(Path(path).read_bytes())
        except OSError as exc:
            raise ValueError(f"{path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise ValueError(f"{path}: no PEM certificate could be read ({exc})") from None
        roots.extend(found)
    return roots


_HASHES: Final = {"sha256": "SHA256", "sha384": "SHA384", "sha512": "SHA512"}


def verify(archive: bytes, der: bytes, trust_roots: Sequence[Any] | None) -> Signature:
    """:func:`_verify`, with every failure of the ASN.1 and crypto libraries on a malformed block turned into
    ``PACKAGE_INVALID`` ``signature-malformed``. The class: a DER that decodes far enough to match the
    archive's digest and then fails in a lazily parsed field (a key, a name, a serial, a certificate
    version), each library raising its own exception type (``ValueError``, ``UnsupportedAlgorithm``,
    ``InvalidVersion``...); it answered INTERNAL_ERROR. Nothing it raises is ever taken as verified."""
    try:
        return _verify(archive, der, trust_roots)
    except HostError:
        raise
    except Exception as exc:
        raise refused(
            "signature-malformed", f"the signature block cannot be read ({type(exc).__name__}: {exc})"
        ) from None


def _verify(archive: bytes, der: bytes, trust_roots: Sequence[Any] | None) -> Signature:
    """Check the detached ``SignedData`` ``der`` over ``archive``; its chain too when ``trust_roots`` is given.

    ``trust_roots``: certificates (:func:`load_trust_roots`), or ``None`` when
    none is configured (then a signature that matches is ``unverified``).
    Raises ``PACKAGE_INVALID`` with ``data.reason`` ``signature-malformed``
    (not a ``SignedData`` hostd can read: one signer, detached, with signed
    attributes, SHA-2, RSA PKCS#1 v1.5 or ECDSA), ``signature-mismatch``
    (the archive or the signed attributes were changed after signing) or
    ``signer-untrusted``. Blocking (CPU only).
    """
    from asn1crypto import cms  # noqa: PLC0415 - lazy, as above
    from cryptography import x509  # noqa: PLC0415
    from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm  # noqa: PLC0415
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa  # noqa: PLC0415

    try:
        info = cms.ContentInfo.load(der, strict=True)
        if info["content_type"].native != "signed_data":
            raise refused("signature-malformed", f"a PKCS#7 {info['content_type'].native!r}, not signedData")
        signed = info["content"]
        signers = signed["signer_infos"]
        if len(signers) != 1:
            raise refused("signature-malformed", f"{len(signers)} signers; mcpb signs with exactly one")
        if signed["encap_content_info"]["content"].native is not None:
            raise refused("signature-malformed", "the signature embeds its content; mcpb signs detached")
        signer = signers[0]
        digest_name = signer["digest_algorithm"]["algorithm"].native
        attributes = signer["signed_attrs"]
        certificates = [
            x509.load_der_x509_certificate(c.chosen.dump())
            for c in signed["certificates"] or []
            if c.name == "certificate"
        ]
        sid = signer["sid"]
        signature_algorithm = signer["signature_algorithm"].signature_algo
        signature = signer["signature"].native
        by_type = {a["type"].native: a["values"] for a in attributes} if attributes.native is not None else {}
        signed_bytes = b"\x31" + attributes.dump()[1:]  # the SET OF the signature covers (RFC 5652 5.4)
    except HostError:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        raise refused("signature-malformed", f"not a PKCS#7 SignedData: {exc}") from None
    if digest_name not in _HASHES:
        raise refused("signature-malformed", f"digest algorithm {digest_name!r}; SHA-256, -384 or -512 expected")
    if "message_digest" not in by_type or "content_type" not in by_type:
        raise refused("signature-malformed", "no signed contentType and messageDigest attributes")
    if by_type["content_type"][0].native != "data":
        raise refused("signature-malformed", "the signed contentType is not 'data'")
    if by_type["message_digest"][0].native != hashlib.new(digest_name, archive).digest():
        raise refused("signature-mismatch", "the archive does not match its signature: changed after signing")
    leaf = next((c for c in certificates if _identifies(sid, c)), None)
    if leaf is None:
        raise refused("signature-malformed", "the signing certificate is not in the signature")
    algorithm: hashes.HashAlgorithm = getattr(hashes, _HASHES[digest_name])()
    key = leaf.public_key()
    try:
        if isinstance(key, rsa.RSAPublicKey) and signature_algorithm == "rsassa_pkcs1v15":
            key.verify(signature, signed_bytes, padding.PKCS1v15(), algorithm)
        elif isinstance(key, ec.EllipticCurvePublicKey) and signature_algorithm == "ecdsa":
            key.verify(signature, signed_bytes, ec.ECDSA(algorithm))
        else:
            raise refused(
                "signature-malformed", f"signature algorithm {signature_algorithm!r} with a {type(key).__name__}"
            )
    except InvalidSignature:
        raise refused("signature-mismatch", "the signed attributes do not match the signature") from None
    except UnsupportedAlgorithm as exc:
        raise refused("signature-malformed", f"unsupported: {exc}") from None
    if trust_roots is None:
        return Signature("unverified")
    _check_chain(leaf, [c for c in certificates if c is not leaf], trust_roots)
    return Signature("verified", leaf.subject.rfc4514_string())


def _identifies(sid: Any, certificate: Any) -> bool:
    """Whether the ``SignerIdentifier`` ``sid`` names ``certificate`` (issuer and serial, or key identifier)."""
    from cryptography import x509  # noqa: PLC0415

    if sid.name == "issuer_and_serial_number":
        chosen = sid.chosen
        issuer: bytes = chosen["issuer"].dump()
        return bool(
            chosen["serial_number"].native == certificate.serial_number and issuer == certificate.issuer.public_bytes()
        )
    try:
        extension = certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
    except x509.ExtensionNotFound:
        return False
    return bool(extension.value.digest == sid.chosen.native)


def _check_chain(leaf: Any, intermediates: list[Any], trust_roots: Sequence[Any]) -> None:
    """Raise ``signer-untrusted`` unless ``leaf`` chains to ``trust_roots`` for code signing, now."""
    from cryptography import x509  # noqa: PLC0415
    from cryptography.x509.oid import ExtendedKeyUsageOID  # noqa: PLC0415
    from cryptography.x509.verification import (  # noqa: PLC0415
        Criticality,
        ExtensionPolicy,
        PolicyBuilder,
        Store,
        VerificationError,
    )

    def code_signing(_policy: Any, _certificate: Any, usage: x509.ExtendedKeyUsage | None) -> None:
        if usage is not None and ExtendedKeyUsageOID.CODE_SIGNING not in usage:
            raise ValueError("the signing certificate's extended key usage does not include codeSigning")

    def digital_signature(_policy: Any, _certificate: Any, usage: x509.KeyUsage | None) -> None:
        if usage is not None and not usage.digital_signature:
            raise ValueError("the signing certificate's key usage does not include digitalSignature")

    # The leaf: the code-signing purpose (as `openssl verify -purpose codesigning`, which mcpb verify runs),
    # not the web PKI's TLS client one; the CAs: the web PKI's rules (basicConstraints, keyCertSign...).
    leaf_policy = (
        ExtensionPolicy.permit_all()
        .may_be_present(x509.ExtendedKeyUsage, Criticality.AGNOSTIC, code_signing)
        .may_be_present(x509.KeyUsage, Criticality.AGNOSTIC, digital_signature)
    )
    verifier = (
        PolicyBuilder()
        .store(Store(list(trust_roots)))
        .time(datetime.datetime.now(datetime.UTC))
        .extension_policies(ca_policy=ExtensionPolicy.webpki_defaults_ca(), ee_policy=leaf_policy)
        .build_client_verifier()
    )
    try:
        verifier.verify(leaf, intermediates)
    except VerificationError as exc:
        raise refused(
            "signer-untrusted",
            f"the signer {leaf.subject.rfc4514_string()}, issued by {leaf.issuer.rfc4514_string()}, does not "
            f"chain to a trust root certificate for code signing ({exc})",
        ) from None
