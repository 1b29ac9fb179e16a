"""The server side of SASL authentication, without I/O.

Mechanisms: ``PLAIN`` (RFC 4616) and ``SCRAM-SHA-256``/``SCRAM-SHA-512`` (RFC 5802, through
``scramp``; credentials are kept salted and hashed, 4096 iterations as Kafka's minimum).

Users come from the configuration:

* ``sasl.users=alice:alice-secret,bob:bob-secret`` -- for every mechanism of every SASL listener;
* Kafka's JAAS form, for PLAIN on one listener:
  ``listener.name.<listener>.plain.sasl.jaas.config=...PlainLoginModule required user_alice="secret";``

A connection's :class:`SaslSession` follows Kafka's states: an optional ApiVersions, a
SaslHandshake naming the mechanism, then the mechanism's tokens -- in SaslAuthenticate requests
after a SaslHandshake v1, as bare length-prefixed frames after a v0 one -- until the client is
authenticated (``principal`` set) or failed (``failed`` set: answer, then close).
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import scramp

from broker.config import ConfigError

log = logging.getLogger(__name__)

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
SCRAM_ITERATIONS = 4096

PLAIN_FAILED = "Authentication failed: Invalid username or password"


def scram_failed(mechanism: str) -> str:
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


class SaslFailure(Exception):
    """The client failed to authenticate; the message is what the client is told."""


def parse_users(text: str) -> dict[str, str]:
    """``sasl.users``: ``name:password,...`` (a password may hold ``:``, not ``,``)."""
    out: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, sep, password = item.strip().partition(":")
        if not sep or not name:
            raise ConfigError(f"sasl.users: expected name:password, got {item.strip().split(':')[0]!r}...")
        out[name] = password
    return out


_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def parse_jaas_users(text: str) -> dict[str, str]:
    """The ``user_<name>="<password>"`` options of a JAAS login module line (Kafka's PLAIN users)."""
    return {
        key[len("user_") :]: value.replace('\\"', '"').replace("\\\\", "\\")
        for key, value in _JAAS_OPTION.findall(text)
        if key.startswith("user_") and len(key) > len("user_")
    }


@dataclass
class Authenticator:
    """What one SASL listener accepts: its mechanisms and users."""

    listener: str
    mechanisms: tuple[str, ...]
    plain_users: dict[str, str]
    #: mechanism -> user -> scramp auth info (salt, stored key, server key, iterations)
    scram_users: dict[str, dict[str, tuple]] = field(default_factory=dict)
    #: connection.failed.authentication.delay.ms
    failure_delay_ms: int = 100

    def session(self) -> SaslSession:
        return SaslSession(self)


def build_authenticator(
    listener: str, prop: Callable[[str], str], scram_store: dict[str, dict[str, tuple]], delay_ms: int
) -> Authenticator:
    """The authenticator of a SASL listener; ``prop(name)`` gives a property's value for it,
    ``scram_store`` the SCRAM credentials derived once from ``sasl.users``."""
    mechanisms = tuple(m.strip().upper() for m in prop("sasl.enabled.mechanisms").split(",") if m.strip())
    unsupported = [m for m in mechanisms if m not in MECHANISMS]
    if unsupported or not mechanisms:
        raise ConfigError(
            f"sasl.enabled.mechanisms (listener {listener}): {', '.join(unsupported) or 'none given'}; "
            f"this broker serves {', '.join(MECHANISMS)}"
        )
    plain = dict(parse_users(prop("sasl.users")))
    plain.update(parse_jaas_users(prop("plain.sasl.jaas.config")))
    if not plain and not any(scram_store.get(m) for m in mechanisms):
        log.warning(
            "listener %s uses SASL but no user is configured (sasl.users): nobody can connect", listener
        )
    return Authenticator(listener, mechanisms, plain, scram_store, delay_ms)


def scram_credentials(users: dict[str, str]) -> dict[str, dict[str, tuple]]:
    """Salted SCRAM credentials for each mechanism (the passwords themselves are not kept)."""
    out: dict[str, dict[str, tuple]] = {}
    for mech in SCRAM_MECHANISMS:
        m = scramp.ScramMechanism(mech)
        out[mech] = {
            name: m.make_auth_info(pw, iteration_count=SCRAM_ITERATIONS) for name, pw in users.items()
        }
    return out


class _UnknownUser(Exception):
    pass


class SaslSession:
    """One connection's authentication (see the module docstring). States: ``handshake`` (before
    SaslHandshake; ApiVersions allowed first), ``authenticate`` (tokens), ``done``."""

    __slots__ = (
        "auth",
        "state",
        "raw",
        "mechanism",
        "principal",
        "failed",
        "user",
        "_scram",
        "versions_answered",
    )

    def __init__(self, auth: Authenticator):
        self.auth = auth
        self.state = "handshake"
        #: after SaslHandshake v0 the tokens come as bare frames
        self.raw = False
        self.mechanism: str | None = None
        #: ``User:<name>`` once authenticated
        self.principal: str | None = None
        #: set when authentication failed: the connection answers, then closes
        self.failed = False
        #: the user name the client gave (for logs; never the password)
        self.user: str | None = None
        self._scram: scramp.core.ScramServer | None = None
        #: an ApiVersions was answered (one that got UNSUPPORTED_VERSION may be retried, as in Kafka)
        self.versions_answered = False

    @property
    def failure_delay_ms(self) -> int:
        return self.auth.failure_delay_ms

    def allows(self, api_key: int) -> str | None:
        """None when a request of ``api_key`` may be handled now, else why the connection closes
        (Kafka: ApiVersions -- until one is answered -- and SaslHandshake before the handshake,
        SaslAuthenticate after it)."""
        if self.state == "handshake":
            if api_key == 17 or (api_key == 18 and not self.versions_answered):
                return None
            if api_key == 18:
                return "unexpected ApiVersions request during SASL handshake"
            return f"unexpected Kafka request of type {api_key} during SASL handshake"
        if self.state == "authenticate" and api_key == 36:
            return None
        return f"unexpected Kafka request of type {api_key} during SASL authentication"

    def handshake(self, mechanism: str, version: int) -> bool:
        """SaslHandshake: True when ``mechanism`` is enabled (the session expects its tokens next)."""
        if mechanism not in self.auth.mechanisms:
            self.failed = True
            return False
        self.mechanism = mechanism
        self.state = "authenticate"
        self.raw = version == 0
        return True

    def step(self, token: bytes) -> bytes:
        """The next server token for the client's ``token``; raises SaslFailure (then ``failed``
        is set). ``principal`` is set once the exchange succeeded."""
        try:
            if self.mechanism == "PLAIN":
                return self._plain(token)
            return self._scram_step(token)
        except SaslFailure:
            self.failed = True
            raise

    def _plain(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslFailure("Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts)))
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        self.user = user
        if not user:
            raise SaslFailure("Authentication failed: username not specified")
        if not password:
            raise SaslFailure("Authentication failed: password not specified")
        if authzid and authzid != user:
            raise SaslFailure(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        expected = self.auth.plain_users.get(user)
        if expected is None or not _same(expected, password):
            raise SaslFailure(PLAIN_FAILED)
        self._succeed(user)
        return b""

    def _scram_step(self, token: bytes) -> bytes:
        mech = self.mechanism
        assert mech is not None
        failed = scram_failed(mech)
        try:
            if self._scram is None:
                users = self.auth.scram_users.get(mech, {})

                def lookup(name: str) -> tuple:
                    self.user = name
                    if name not in users:
                        raise _UnknownUser(name)
                    return users[name]

                self._scram = scramp.ScramMechanism(mech).make_server(lookup)
                self._scram.set_client_first(token.decode("utf-8"))
                return self._scram.get_server_first().encode()
            self._scram.set_client_final(token.decode("utf-8"))
            final = self._scram.get_server_final().encode()
        except Exception:  # unknown user, bad proof, malformed message: all the same to the client
            raise SaslFailure(failed) from None
        self._succeed(self.user or "")
        return final

    def _succeed(self, user: str) -> None:
        self.principal = "User:" + user
        self.state = "done"
        self._scram = None


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())
