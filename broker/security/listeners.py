"""What each listener needs for its security protocol: a TLS context (SSL, SASL_SSL) and a SASL
authenticator (SASL_PLAINTEXT, SASL_SSL). Built once at start-up; a missing key file or an
unusable setting is a ConfigError naming it."""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from broker.config import Config, Endpoint

from .sasl import Authenticator, build_authenticator, parse_users, scram_credentials
from .tls import PrincipalRules, server_context


@dataclass(frozen=True)
class ListenerSecurity:
    tls: ssl.SSLContext | None = None
    sasl: Authenticator | None = None
    #: ssl.principal.mapping.rules of a TLS listener
    principal_rules: PrincipalRules | None = None


def listener_security(config: Config, endpoints: list[Endpoint]) -> dict[str, ListenerSecurity]:
    """Listener name -> its TLS context and SASL authenticator (both None for PLAINTEXT)."""
    out: dict[str, ListenerSecurity] = {}
    scram_store: dict[str, dict[str, tuple]] | None = None
    for ep in endpoints:

        def prop(key: str, name: str = ep.name) -> str:
            return config.listener_prop(name, key)

        tls = server_context(prop, ep.name) if ep.tls else None
        rules = PrincipalRules(prop("ssl.principal.mapping.rules")) if ep.tls else None
        sasl = None
        if ep.sasl:
            if scram_store is None:  # salted once, whatever the number of SASL listeners
                scram_store = scram_credentials(parse_users(config["sasl.users"]))
            sasl = build_authenticator(
                ep.name, prop, scram_store, config["connection.failed.authentication.delay.ms"]
            )
        out[ep.name] = ListenerSecurity(tls, sasl, rules)
    return out
