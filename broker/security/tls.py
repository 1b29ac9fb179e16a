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

import importlib
import os
import re
import ssl
from collections.abc import Callable
from types import ModuleType

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
        raise ConfigError(
            f"ssl.client.auth ({where}): must be one of none, requested, required, got {auth!r}"
        )
    if auth != "none" and not (trust_file or trust_text):
        raise ConfigError(
            f"ssl.client.auth={auth} ({where}) needs the CAs to check client certificates against: "
            "set ssl.truststore.location or ssl.truststore.certificates"
        )
    ctx.verify_mode = CLIENT_AUTH[auth]
    return ctx


def _tempfile() -> ModuleType:
    """tempfile, imported on first use: only an inline key and chain need it, and its import (shutil,
    random, bz2, lzma: ~3 ms) is not paid by every broker start."""
    return importlib.import_module("tempfile")


def _load_inline_chain(ctx: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    """``load_cert_chain`` reads files only: the PEM text goes through a private temporary file."""
    fd, path = _tempfile().mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def principal_from_cert(cert: dict | None, rules: PrincipalRules | None = None) -> str:
    """Kafka's SSL principal: ``User:`` and the subject's distinguished name, most specific
    attribute first (``User:CN=app,O=Example``), mapped by ``ssl.principal.mapping.rules`` when
    given; ``User:ANONYMOUS`` without a certificate."""
    if not cert or not cert.get("subject"):
        return "User:ANONYMOUS"
    dn = subject_dn(cert)
    return "User:" + (rules.apply(dn) if rules is not None else dn)


def subject_dn(cert: dict) -> str:
    """The certificate subject as RFC 2253 text (Java's ``X500Principal.getName()``)."""
    short = {
        "commonName": "CN",
        "organizationName": "O",
        "organizationalUnitName": "OU",
        "countryName": "C",
        "localityName": "L",
        "stateOrProvinceName": "ST",
        "domainComponent": "DC",
        "streetAddress": "STREET",
        "userId": "UID",
    }
    parts = [
        f"{short.get(name, name)}={_escape_dn(value)}"
        for rdn in reversed(cert["subject"])
        for name, value in rdn
    ]
    return ",".join(parts)


def _escape_dn(value: str) -> str:
    out = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


#: one rule of ``ssl.principal.mapping.rules``, compiled by the first TLS listener's rules (re keeps
#: the compiled pattern), not at every start (~0.1 ms)
_RULE = r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)"


class PrincipalRules:
    """``ssl.principal.mapping.rules`` as Kafka reads them: ``RULE:pattern/replacement/[L|U]`` and
    ``DEFAULT``, comma-separated; the first rule whose pattern matches the whole distinguished name
    gives the name (``$1``... are its groups; ``L``/``U`` lower/upper-case it), ``DEFAULT`` the
    name itself. No rule matching: the name itself."""

    def __init__(self, text: str):
        self.rules: list[tuple[re.Pattern[str], str, str] | None] = []
        text = text.strip()
        rule = re.compile(_RULE)
        pos = 0
        while pos < len(text):
            m = rule.match(text, pos)
            if m is None or m.end() == pos:
                raise ConfigError(f"ssl.principal.mapping.rules: invalid rule at {text[pos:]!r}")
            if m.group(1):
                self.rules.append(None)
            else:
                try:
                    pattern = re.compile(m.group(2))
                except re.error as e:
                    raise ConfigError(
                        f"ssl.principal.mapping.rules: bad pattern {m.group(2)!r}: {e}"
                    ) from None
                replacement = re.sub(r"\$(\d+)", r"\\g<\1>", m.group(3))
                self.rules.append((pattern, replacement, m.group(4)))
            pos = m.end()

    def apply(self, dn: str) -> str:
        for rule in self.rules:
            if rule is None:
                return dn
            pattern, replacement, case = rule
            m = pattern.fullmatch(dn)
            if m is not None:
                name = m.expand(replacement)
                return name.lower() if case == "L" else name.upper() if case == "U" else name
        return dn
