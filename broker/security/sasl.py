"""The server side of SASL authentication, without I/O.

Mechanisms: ``PLAIN`` (RFC 4616), ``SCRAM-SHA-256``/``SCRAM-SHA-512`` (RFC 5802, through
``scramp``; credentials are kept salted and hashed, 4096 iterations as Kafka's minimum, in a
:class:`~.scram_store.ScramCredentials` that AlterUserScramCredentials changes) and ``OAUTHBEARER``
(RFC 7628, :mod:`.oauth`).

Users come from the configuration:

* ``sasl.users=alice:alice-secret,bob:bob-secret`` -- for every mechanism of every SASL listener;
* Kafka's JAAS form, for PLAIN on one listener:
  ``listener.name.<listener>.plain.sasl.jaas.config=...PlainLoginModule required user_alice="secret";``

A connection's :class:`SaslSession` follows Kafka's states: an optional ApiVersions, a
SaslHandshake naming the mechanism, then the mechanism's tokens -- in SaslAuthenticate requests
after a SaslHandshake v1, as bare length-prefixed frames after a v0 one -- until the client is
authenticated (``principal`` set) or failed (``failed`` set: answer, then close).

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0, or a credential that expires
(an OAUTHBEARER token's ``exp``), a successful authentication gives the session a lifetime (the
smaller of the two), reported in SaslAuthenticate v1+. A client re-authenticates on the same
connection with a new SaslHandshake (same mechanism) and SaslAuthenticate, as the same principal;
a connection whose session has expired is closed at its next request (Kafka's SocketServer).
"""

from __future__ import annotations

import hmac
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import scramp

from broker.config import ConfigError

from .errors import SaslFailure
from .oauth import BadClientMessage, InvalidToken, Validator, build_validator, parse_client_first
from .scram_store import ScramCredentials

log = logging.getLogger(__name__)

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
OAUTHBEARER = "OAUTHBEARER"
MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, OAUTHBEARER)
SCRAM_ITERATIONS = 4096

PLAIN_FAILED = "Authentication failed: Invalid username or password"


#: Kafka refuses a second re-authentication within this long (KafkaChannel)
MIN_REAUTH_INTERVAL_MS = 1000


def scram_failed(mechanism: str, reauthenticating: bool = False) -> str:
    what = "re-authentication" if reauthenticating else "authentication"
    return f"Authentication failed during {what} due to invalid credentials with SASL mechanism {mechanism}"


def wall_ms() -> int:
    return int(time.time() * 1000)


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
    #: the OAUTHBEARER token validator (when OAUTHBEARER is enabled)
    oauth: Validator | None = None
    #: connections.max.reauth.ms per mechanism (0: sessions do not expire unless their credential does)
    max_reauth_ms: dict[str, int] = field(default_factory=dict)
    #: the wall clock, ms (OAUTHBEARER expiry, session lifetimes); replaced by tests
    clock: Callable[[], int] = wall_ms

    def session(self) -> SaslSession:
        return SaslSession(self)


def build_authenticator(
    listener: str,
    prop: Callable[[str], str],
    scram_store: ScramCredentials | dict[str, dict[str, tuple]],
    delay_ms: int,
) -> Authenticator:
    """The authenticator of a SASL listener; ``prop(name)`` gives a property's value for it,
    ``scram_store`` the broker's SCRAM credentials (shared: changes apply at once)."""
    if isinstance(scram_store, ScramCredentials):
        scram_store = scram_store.users
    mechanisms = tuple(m.strip().upper() for m in prop("sasl.enabled.mechanisms").split(",") if m.strip())
    unsupported = [m for m in mechanisms if m not in MECHANISMS]
    if unsupported or not mechanisms:
        raise ConfigError(
            f"sasl.enabled.mechanisms (listener {listener}): {', '.join(unsupported) or 'none given'}; "
            f"this broker serves {', '.join(MECHANISMS)}"
        )
    plain = dict(parse_users(prop("sasl.users")))
    plain.update(parse_jaas_users(prop("plain.sasl.jaas.config")))
    oauth = build_validator(lambda key: prop(key)) if OAUTHBEARER in mechanisms else None
    if not plain and oauth is None and not any(scram_store.get(m) for m in mechanisms):
        log.warning(
            "listener %s uses SASL but no user is configured (sasl.users): nobody can connect", listener
        )
    reauth: dict[str, int] = {}
    for m in mechanisms:  # Kafka: listener.name.<l>.<mechanism>.connections.max.reauth.ms, else the broker's
        value = prop(f"{m.lower()}.connections.max.reauth.ms") or prop("connections.max.reauth.ms") or "0"
        try:
            reauth[m] = int(value)
        except ValueError:
            raise ConfigError(
                f"connections.max.reauth.ms (listener {listener}): not an integer: {value!r}"
            ) from None
    return Authenticator(listener, mechanisms, plain, scram_store, delay_ms, oauth, reauth)


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
        "_oauth_error",
        "credential_expires_ms",
        "session_lifetime_ms",
        "expires_at_ms",
        "reauthenticating",
        "_reauth_started_ms",
        "supports_reauth",
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
        #: OAUTHBEARER: the JSON error sent for an invalid token (the client's \x01 then fails)
        self._oauth_error: str | None = None
        #: when the credential of the last authentication expires (OAUTHBEARER's exp), else None
        self.credential_expires_ms: int | None = None
        #: the lifetime given with the last successful authentication (0: none)
        self.session_lifetime_ms = 0
        #: when the session expires (``auth.clock`` ms), None when it does not
        self.expires_at_ms: int | None = None
        #: a re-authentication is in progress (the previous principal and mechanism must stay)
        self.reauthenticating = False
        self._reauth_started_ms = 0
        #: the client used SaslAuthenticate v1+ (KIP-368)
        self.supports_reauth = False

    @property
    def failure_delay_ms(self) -> int:
        return self.auth.failure_delay_ms

    def allows(self, api_key: int) -> str | None:
        """None when a request of ``api_key`` may be handled now, else why the connection closes
        (Kafka: ApiVersions -- until one is answered -- and SaslHandshake before the handshake,
        SaslAuthenticate after it; no ApiVersions during a re-authentication)."""
        if self.state == "handshake":
            if api_key == 17 or (api_key == 18 and not self.versions_answered and not self.reauthenticating):
                return None
            if api_key == 18:
                return "unexpected ApiVersions request during SASL handshake"
            return f"unexpected Kafka request of type {api_key} during SASL handshake"
        if self.state == "authenticate" and api_key == 36:
            return None
        return f"unexpected Kafka request of type {api_key} during SASL authentication"

    def handshake(self, mechanism: str, version: int) -> bool:
        """SaslHandshake: True when ``mechanism`` is enabled (the session expects its tokens next);
        during a re-authentication only the mechanism of the first authentication is."""
        if mechanism not in self.auth.mechanisms or (self.reauthenticating and mechanism != self.mechanism):
            self.failed = True
            return False
        self.mechanism = mechanism
        self.state = "authenticate"
        self.raw = version == 0
        return True

    # ------------------------------------------------------------------ expiry and re-authentication

    def expired(self, now_ms: int | None = None) -> bool:
        """The session had a lifetime and it is over (the connection must close)."""
        if self.expires_at_ms is None:
            return False
        return (self.auth.clock() if now_ms is None else now_ms) > self.expires_at_ms

    def begin_reauthentication(self) -> bool:
        """A SaslHandshake arrived on an authenticated connection: True when it starts a
        re-authentication (Kafka: only for a session with an expiry, at most once a second);
        False: the handshake is handled as any request (and answered ILLEGAL_SASL_STATE)."""
        if self.state != "done" or self.expires_at_ms is None:
            return False
        now = self.auth.clock()
        if self._reauth_started_ms and now - self._reauth_started_ms < MIN_REAUTH_INTERVAL_MS:
            return False
        self._reauth_started_ms = now
        self.reauthenticating = True
        self.state = "handshake"
        self.raw = False
        return True

    # ------------------------------------------------------------------ tokens

    def step(self, token: bytes, version: int = 0) -> bytes:
        """The next server token for the client's ``token`` (``version``: the SaslAuthenticate
        version; 0 for bare tokens); raises SaslFailure (then ``failed`` is set). ``state`` is
        ``done`` once the exchange succeeded (``principal``, ``session_lifetime_ms`` set)."""
        if version > 0:
            self.supports_reauth = True
        try:
            if self.mechanism == "PLAIN":
                return self._plain(token)
            if self.mechanism == OAUTHBEARER:
                return self._oauthbearer(token)
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
        failed = scram_failed(mech, self.reauthenticating)
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

    def _oauthbearer(self, token: bytes) -> bytes:
        """Kafka's OAuthBearerSaslServer: an invalid token is answered with the JSON error, and the
        client's ``\\x01`` that follows fails the authentication with it."""
        if token == b"\x01" and self._oauth_error is not None:
            raise SaslFailure(self._oauth_error)
        self._oauth_error = None
        try:
            first = parse_client_first(token)
        except BadClientMessage as e:
            log.debug("OAUTHBEARER from listener %s: %s", self.auth.listener, e)
            raise SaslFailure(scram_failed(OAUTHBEARER, self.reauthenticating)) from None
        assert self.auth.oauth is not None
        try:
            valid = self.auth.oauth.validate(first.token, self.auth.clock())
        except InvalidToken as e:
            self._oauth_error = e.json()
            log.info("OAUTHBEARER token refused on listener %s: %s", self.auth.listener, e)
            return self._oauth_error.encode()
        self.user = valid.principal
        if first.authzid and first.authzid != valid.principal:
            raise SaslFailure(
                f"Authentication failed: Client requested an authorization id ({first.authzid}) that is "
                f"different from the token's principal name ({valid.principal})"
            )
        self._succeed(valid.principal, valid.expires_ms)
        return b""

    def _succeed(self, user: str, credential_expires_ms: int | None = None) -> None:
        principal = "User:" + user
        if self.reauthenticating and principal != self.principal:
            old = (self.principal or "User:").split(":", 1)
            raise SaslFailure(
                f"Cannot change principals during re-authentication from {old[0]}.{old[1]}: User.{user}"
            )
        self.principal = principal
        self.state = "done"
        self._scram = None
        self.reauthenticating = False
        self.credential_expires_ms = credential_expires_ms
        self._set_lifetime()

    def _set_lifetime(self) -> None:
        """Kafka's ReauthInfo.calcCompletionTimesAndReturnSessionLifetimeMs."""
        now = self.auth.clock()
        max_reauth = self.auth.max_reauth_ms.get(self.mechanism or "", 0)
        expires = self.credential_expires_ms
        if expires is None and max_reauth <= 0:
            self.session_lifetime_ms, self.expires_at_ms = 0, None
            return
        if expires is None:
            lifetime = max_reauth
        elif max_reauth <= 0:
            lifetime = expires - now
        else:
            lifetime = min(expires - now, max_reauth)
        self.session_lifetime_ms = max(0, lifetime)
        self.expires_at_ms = now + self.session_lifetime_ms


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())
