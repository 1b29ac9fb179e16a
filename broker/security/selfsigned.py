"""``serve --tls self-signed``: a local CA and a server certificate signed by it, kept in the data
directory (``<data dir>/tls/``) and reused on later starts, so that clients configured once with
the CA keep working.

* ``ca.pem``: the CA certificate (what clients trust: ``ssl.ca.location``, or Java's
  ``ssl.truststore.type=PEM`` + ``ssl.truststore.location``);
* ``ca-key.pem``: the CA's private key (only used to sign the server certificate);
* ``server.pem``: the server's private key and certificate chain (``ssl.keystore.location``),
  valid for localhost, 127.0.0.1, ::1, this host's name and the listeners' advertised hosts.

Keys are EC P-256; the server certificate is re-issued when a host name is missing from it.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
from collections.abc import Iterable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 825


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pykbroker"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _san(hosts: Iterable[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for h in dict.fromkeys(h for h in hosts if h):
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            out.append(x509.DNSName(h))
    return out


def _names_of(cert: x509.Certificate) -> set[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {str(n) for n in san.get_values_for_type(x509.DNSName)} | {
        str(ip) for ip in san.get_values_for_type(x509.IPAddress)
    }


def ensure_self_signed(data_dir: Path, hosts: Iterable[str] = ()) -> tuple[Path, Path]:
    """The CA certificate and the server key+chain files in ``data_dir/tls`` (created, or reused
    when they exist and cover ``hosts``): (ca.pem, server.pem)."""
    d = data_dir / "tls"
    d.mkdir(parents=True, exist_ok=True)
    ca_file, ca_key_file, server_file = d / "ca.pem", d / "ca-key.pem", d / "server.pem"
    wanted = {
        "localhost",
        "127.0.0.1",
        "::1",
        socket.gethostname(),
        *(h for h in hosts if h not in ("", "0.0.0.0", "::")),
    }
    wanted = {str(ipaddress.ip_address(h)) if _is_ip(h) else h for h in wanted}
    now = datetime.datetime.now(datetime.UTC)
    if ca_file.exists() and ca_key_file.exists():
        ca_cert = x509.load_pem_x509_certificate(ca_file.read_bytes())
        ca_key = serialization.load_pem_private_key(ca_key_file.read_bytes(), None)
    else:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(_name("pykbroker local CA"))
            .issuer_name(_name("pykbroker local CA"))
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(ca_key, hashes.SHA256())
        )
        _write_private(ca_key_file, _key_pem(ca_key))
        ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
        server_file.unlink(missing_ok=True)  # a new CA: the old server certificate is void
    if server_file.exists():
        current = x509.load_pem_x509_certificate(server_file.read_bytes())
        if wanted <= _names_of(current) and current.not_valid_after_utc > now + datetime.timedelta(days=1):
            return ca_file, server_file
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("pykbroker"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(_san(sorted(wanted))), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    _write_private(
        server_file,
        _key_pem(key)
        + cert.public_bytes(serialization.Encoding.PEM)
        + ca_cert.public_bytes(serialization.Encoding.PEM),
    )
    return ca_file, server_file


def _is_ip(h: str) -> bool:
    try:
        ipaddress.ip_address(h)
    except ValueError:
        return False
    return True
