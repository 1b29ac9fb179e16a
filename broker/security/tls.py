"""A server-side ``ssl.SSLContext`` from Kafka's PEM properties.

Kafka's names, PEM only (``ssl.keystore.type=PEM``, ``ssl.truststore.type=PEM``):

* the server's key and certificate chain: ``ssl.keystore.location`` (one PEM file holding the
  private key and the chain; ``ssl.key.password`` decrypts the key), or the PEM text itself in
  ``ssl.keystore.key`` and ``ssl.keystore.certificate.chain``;
* the CAs client certificates are checked against: ``ssl.truststore.location`` (a PEM file) or
  ``ssl.truststore.certificates`` (PEM text);
* ``ssl.client.auth``: ``none`` (default), ``requested`` (a certificate is checked when given),
  ``required`` (mTLS: a client without a trusted certificate fails the handshake).

Every property may be given per listener as ``listener.name.<listener>.<property>``.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Callable

from broker.config import ConfigError

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_context(prop: Callable[[str], str], listener: str) -> ssl.SSLContext:
    """The TLS context of ``listener``; ``prop(name)`` gives a property's value for it ("" when
    unset). Raises ConfigError naming the property at fault."""
    where = f"listener {listener}"
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        kind = (prop(key) or "PEM").strip().upper()
        if kind != "PEM":
            raise ConfigError(f"{key}={kind} ({where}): only PEM key and trust stores are supported")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    password = prop("ssl.key.password") or prop("ssl.keystore.password") or None
    location = prop("ssl.keystore.location").strip()
    chain, key = prop("ssl.keystore.certificate.chain"), prop("ssl.keystore.key")
    try:
        if chain and key:
            _load_inline_chain(ctx, chain, key, password)
        elif location:
            ctx.load_cert_chain(location, password=password)
        else:
            raise ConfigError(
                f"{where} uses TLS: set ssl.keystore.location (a PEM file with the key and certificate "
                "chain) or ssl.keystore.certificate.chain and ssl.keystore.key"
            )
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"cannot load the TLS key and certificate of {where}: {e}") from None
    trust_file = prop("ssl.truststore.location").strip()
    trust_text = prop("ssl.truststore.certificates")
    try:
        if trust_file:
            ctx.load_verify_locations(cafile=trust_file)
        if trust_text:
            ctx.load_verify_locations(cadata=trust_text)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"cannot load the TLS trust store of {where}: {e}") from None
    auth = (prop("ssl.client.auth") or "none").strip().lower()
    if auth not in CLIENT_AUTH:
        raise ConfigError(f"ssl.client.auth ({where}): must be one of none, requested, required, got {auth!r}")
    if auth != "none" and not (trust_file or trust_text):
        raise ConfigError(
            f"ssl.client.auth={auth} ({where}) needs the CAs to check client certificates against: "
            "set ssl.truststore.location or ssl.truststore.certificates"
        )
    ctx.verify_mode = CLIENT_AUTH[auth]
    return ctx


def _load_inline_chain(ctx: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    """``load_cert_chain`` reads files only: the PEM text goes through a private temporary file."""
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def principal_from_cert(cert: dict | None) -> str:
    """Kafka's default SSL principal: ``User:`` and the subject's distinguished name, most specific
    attribute first (``User:CN=app,O=Example``); ``User:ANONYMOUS`` without a certificate."""
    if not cert or not cert.get("subject"):
        return "User:ANONYMOUS"
    short = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU",
             "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
             "domainComponent": "DC", "streetAddress": "STREET", "userId": "UID"}
    parts = [
        f"{short.get(name, name)}={value}" for rdn in reversed(cert["subject"]) for name, value in rdn
    ]
    return "User:" + ",".join(parts)
