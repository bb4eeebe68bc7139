"""Self-signed certificates for the tests' loopback servers (one maker: the tests' TLS upstreams and
bench/proxy_cost.py all use it).

A certificate names one host: a DNS name (``api.test``) or an IP address (``127.0.0.1``), in its subject and its
subjectAltName (a DNS name or an IP address entry, as clients check), valid from a day ago to a day ahead, its
own CA (a client trusts it by loading the PEM file as its CA file).
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def self_signed(folder: Path, host: str) -> tuple[Path, Path]:
    """A self-signed certificate for ``host`` and its EC P-256 key: ``(certificate PEM, key PEM)``, written in
    ``folder`` (created) as ``<host>.pem`` and ``<host>.key``."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    try:
        alt: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        alt = x509.DNSName(host)
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([alt]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = folder / f"{host}.pem", folder / f"{host}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def server_context(folder: Path, host: str) -> tuple[ssl.SSLContext, Path]:
    """A server TLS context for ``host`` (:func:`self_signed`) and its certificate's PEM file (a client's CA)."""
    cert_path, key_path = self_signed(folder, host)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_path, key_path)
    return context, cert_path
