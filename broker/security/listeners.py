"""What each listener needs for its security protocol: a TLS context (SSL, SASL_SSL) and a SASL
authenticator (SASL_PLAINTEXT, SASL_SSL). Built once at start-up; a missing key file or an
unusable setting is a ConfigError naming it.

The SASL mechanisms (:mod:`.sasl`, with scramp, asn1crypto and the OAUTHBEARER validator) are a
plug-in resolved here, at configuration time: :data:`SASL_MODULE` is imported only when the
configuration has a SASL listener or ``sasl.users``, so a PLAINTEXT broker starts without loading
them. Nothing else in the broker imports :mod:`.sasl` (the request path knows only
:class:`~.errors.SaslFailure`)."""

from __future__ import annotations

import importlib
import ssl
from types import ModuleType
from typing import TYPE_CHECKING, NamedTuple

from broker.config import Config, Endpoint

from .scram_store import ScramCredentials
from .tls import PrincipalRules, server_context

if TYPE_CHECKING:
    from .sasl import Authenticator

#: the module implementing SASL (build_authenticator, parse_users, scram_credentials)
SASL_MODULE = "broker.security.sasl"


def sasl_module() -> ModuleType:
    """The SASL implementation, imported on first use (see the module docstring)."""
    return importlib.import_module(SASL_MODULE)


class ListenerSecurity(NamedTuple):  # not a dataclass: see broker.config.Setting
    tls: ssl.SSLContext | None = None
    sasl: Authenticator | None = None
    #: ssl.principal.mapping.rules of a TLS listener
    principal_rules: PrincipalRules | None = None


def configured_scram(config: Config) -> ScramCredentials:
    """The SCRAM credentials of ``sasl.users`` (salted here; the passwords are not kept)."""
    if not config["sasl.users"].strip():
        return ScramCredentials()
    sasl = sasl_module()
    return ScramCredentials(sasl.scram_credentials(sasl.parse_users(config["sasl.users"])))


def listener_security(
    config: Config, endpoints: list[Endpoint], scram: ScramCredentials | None = None
) -> dict[str, ListenerSecurity]:
    """Listener name -> its TLS context and SASL authenticator (both None for PLAINTEXT).
    ``scram``: the broker's SCRAM credentials (default: those of ``sasl.users``), shared by every
    SASL listener."""
    out: dict[str, ListenerSecurity] = {}
    scram_store = scram
    for ep in endpoints:

        def prop(key: str, name: str = ep.name) -> str:
            return config.listener_prop(name, key)

        tls = server_context(prop, ep.name) if ep.tls else None
        rules = PrincipalRules(prop("ssl.principal.mapping.rules")) if ep.tls else None
        sasl = None
        if ep.sasl:
            if scram_store is None:  # salted once, whatever the number of SASL listeners
                scram_store = configured_scram(config)
            sasl = sasl_module().build_authenticator(
                ep.name, prop, scram_store, config["connection.failed.authentication.delay.ms"]
            )
        out[ep.name] = ListenerSecurity(tls, sasl, rules)
    return out
