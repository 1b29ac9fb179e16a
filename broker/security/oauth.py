"""SASL/OAUTHBEARER (RFC 7628, KIP-255, KIP-768) on the server side, without I/O.

The client's first message is RFC 7628's: a GS2 header (``n,`` and an optional ``a=<authzid>``),
then ``\\x01``-separated key=value pairs, one of them ``auth=Bearer <token>``, the others SASL
extensions, and a final ``\\x01``; parsed with Kafka's patterns (OAuthBearerClientInitialResponse).

Two validators, as Kafka's brokers have:

* :class:`UnsecuredValidator` (the default): Kafka's OAuthBearerUnsecuredValidatorCallbackHandler,
  for development. The token is an unsecured JWS (``alg: none``, empty signature); the principal is
  the ``sub`` claim (``unsecuredValidatorPrincipalClaimName``), ``exp`` is required and ``iat``
  checked when present, both with ``unsecuredValidatorAllowableClockSkewMs`` of slack, ``exp``
  after ``iat``, and every scope of ``unsecuredValidatorRequiredScope`` must be in the token's
  ``scope`` claim (``unsecuredValidatorScopeClaimName``). The options are those of the listener's
  JAAS line (``listener.name.<l>.oauthbearer.sasl.jaas.config=...OAuthBearerLoginModule required
  unsecuredValidatorRequiredScope="write";``).
* :class:`JwksValidator`: signed tokens (Kafka's OAuthBearerValidatorCallbackHandler), when
  ``sasl.oauthbearer.jwks.endpoint.url`` is set (a ``file://`` path to a JWKS document): the
  signature is checked with PyJWT against the key of the token's ``kid`` (or the only key), and
  ``exp``, ``iat``, ``nbf`` with ``sasl.oauthbearer.clock.skew.seconds``, the audience against
  ``sasl.oauthbearer.expected.audience`` and the issuer against ``sasl.oauthbearer.expected.issuer``
  when set; the principal is ``sasl.oauthbearer.sub.claim.name`` (``sub``).

An invalid token is answered, as Kafka does, with the server's error message
``{"status":"invalid_token"}`` (``insufficient_scope`` and the scope for a missing scope) instead
of a failure; the client acknowledges it with a single ``\\x01`` and only then is authentication
failed, with that JSON as the error message.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from broker.config import ConfigError

if TYPE_CHECKING:
    import jwt

SEPARATOR = "\x01"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
# Java's [\x01-\x7F&&[^=,]] (a class intersection) written as Python can
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_KVPAIRS = rf"(?:{_KEY}={_VALUE}{SEPARATOR})*"
CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{SEPARATOR}(?P<kvpairs>{_KVPAIRS}){SEPARATOR}", re.S
)
AUTH = re.compile(r"(?P<scheme>\w+)[ ]+(?P<token>[-_~+/.a-zA-Z0-9]+=*)", re.S)
_EXT_KEY = re.compile(_KEY)
_EXT_VALUE = re.compile(_VALUE, re.S)

#: Kafka's JAAS option names of the unsecured validator
PRINCIPAL_CLAIM_OPTION = "unsecuredValidatorPrincipalClaimName"
SCOPE_CLAIM_OPTION = "unsecuredValidatorScopeClaimName"
REQUIRED_SCOPE_OPTION = "unsecuredValidatorRequiredScope"
CLOCK_SKEW_OPTION = "unsecuredValidatorAllowableClockSkewMs"


class BadClientMessage(Exception):
    """The client's message is not RFC 7628's (Kafka: a SaslException, the generic failure)."""


class InvalidToken(Exception):
    """The token is not valid: ``status`` and ``scope`` make the JSON error sent to the client;
    the exception's text is the reason (logged, never sent)."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str | None = None):
        super().__init__(reason)
        self.status = status
        self.scope = scope

    def json(self) -> str:
        """Kafka's jsonErrorResponse."""
        out = f'{{"status":"{self.status}"'
        if self.scope is not None:
            out += f', "scope":"{self.scope}"'
        return out + "}"


@dataclass(frozen=True)
class ValidToken:
    principal: str
    #: when the token expires (ms since the epoch): the credential's lifetime for re-authentication
    expires_ms: int | None
    scope: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ClientFirst:
    token: str
    authzid: str
    extensions: dict[str, str]


def parse_client_first(message: bytes) -> ClientFirst:
    """The token, authorization id and extensions of an OAUTHBEARER client first message."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise BadClientMessage("Invalid OAUTHBEARER client first message") from None
    m = CLIENT_FIRST.fullmatch(text)
    if m is None:
        raise BadClientMessage("Invalid OAUTHBEARER client first message")
    props: dict[str, str] = {}
    for pair in m.group("kvpairs").split(SEPARATOR):
        if pair:
            key, _, value = pair.partition("=")
            props[key] = value
    auth = props.pop("auth", None)
    if auth is None:
        raise BadClientMessage("Invalid OAUTHBEARER client first message: 'auth' not specified")
    for key, value in props.items():
        if not _EXT_KEY.fullmatch(key) or not _EXT_VALUE.fullmatch(value):
            raise BadClientMessage(f"Extension name {key} is invalid")
    am = AUTH.fullmatch(auth)
    if am is None:
        raise BadClientMessage("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if am.group("scheme").lower() != "bearer":
        raise BadClientMessage(f"Invalid scheme in OAUTHBEARER client first message: {am.group('scheme')}")
    authzid = (m.group("authzid") or "").replace("=2C", ",").replace("=3D", "=")
    return ClientFirst(am.group("token"), authzid, props)


def _b64json(part: str) -> dict:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise InvalidToken("malformed Base64 URL encoded value") from None
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise InvalidToken("malformed JSON") from None
    if not isinstance(value, dict):
        raise InvalidToken("malformed JSON")
    return value


def _number(claims: dict, name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidToken(f"The '{name}' claim was not of type Number: {value!r}")
    return float(value)


def _scope(claims: dict, name: str) -> frozenset[str]:
    value = claims.get(name)
    if isinstance(value, str):
        return frozenset(value.split()) if value.strip() else frozenset()
    if isinstance(value, list):
        return frozenset(s.strip() for s in value if isinstance(s, str) and s.strip())
    return frozenset()


class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler (see the module docstring)."""

    def __init__(self, options: dict[str, str]):
        self.principal_claim = (options.get(PRINCIPAL_CLAIM_OPTION) or "").strip() or "sub"
        self.scope_claim = (options.get(SCOPE_CLAIM_OPTION) or "").strip() or "scope"
        self.required_scope = tuple((options.get(REQUIRED_SCOPE_OPTION) or "").split())
        skew = (options.get(CLOCK_SKEW_OPTION) or "").strip()
        try:
            self.skew_ms = int(skew) if skew else 0
        except ValueError:
            raise ConfigError(f"{CLOCK_SKEW_OPTION}: not an integer: {skew!r}") from None
        if self.skew_ms < 0:
            raise ConfigError(f"Allowable clock skew millis must not be negative: {skew}")

    def validate(self, token: str, now_ms: int) -> ValidToken:
        parts = token.split(".")
        if len(parts) == 2 and token.endswith("."):
            parts.append("")
        if len(parts) != 3:
            raise InvalidToken(
                "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"
            )
        header = _b64json(parts[0])
        claims = _b64json(parts[1])
        if header.get("alg") != "none":
            raise InvalidToken("Unsecured JWS must have 'none' for an algorithm")
        if parts[2]:
            raise InvalidToken("Unsecured JWS must not contain a digital signature")
        principal = claims.get(self.principal_claim)
        if principal is None:
            raise InvalidToken(f"Required claim missing: {self.principal_claim}")
        if not isinstance(principal, str) or not principal.strip():
            raise InvalidToken(f"The {self.principal_claim} claim had the incorrect type")
        iat, exp = _number(claims, "iat"), _number(claims, "exp")
        if iat is not None and 1000 * iat > now_ms + self.skew_ms:
            raise InvalidToken(
                f"The Issued At value ({iat} seconds) was after the indicated time ({now_ms} ms) "
                f"plus allowable clock skew ({self.skew_ms} ms)"
            )
        if exp is None:
            raise InvalidToken("Required claim missing: exp")
        if now_ms - self.skew_ms >= 1000 * exp:
            raise InvalidToken(
                f"The indicated time ({now_ms} ms) minus allowable clock skew ({self.skew_ms} ms) "
                f"was on or after the Expiration Time value ({exp} seconds)"
            )
        if iat is not None and exp <= iat:
            raise InvalidToken(
                f"The Expiration Time time ({exp} seconds) was not after the Issued At time ({iat} seconds)"
            )
        scope = _scope(claims, self.scope_claim)
        for needed in self.required_scope:
            if needed not in scope:
                raise InvalidToken(
                    f"The provided scope ({sorted(scope)}) was missing a required scope ({needed})",
                    "insufficient_scope",
                    "[" + ", ".join(self.required_scope) + "]",
                )
        return ValidToken(principal, int(1000 * exp), scope)


class JwksValidator:
    """Signed JWTs checked against a JWKS file (see the module docstring)."""

    def __init__(
        self,
        jwks_path: Path,
        audience: list[str],
        issuer: str | None,
        principal_claim: str,
        scope_claim: str,
        skew_seconds: int,
    ):
        # PyJWT only when a JWKS is configured: importing it (with cryptography's parts) is about a
        # quarter of the broker's start-up, which a broker without signed tokens does not pay
        import jwt  # noqa: PLC0415

        self.jwt = jwt
        try:
            self.keys = jwt.PyJWKSet.from_json(jwks_path.read_text())
        except (OSError, jwt.PyJWTError, ValueError) as e:
            raise ConfigError(
                f"sasl.oauthbearer.jwks.endpoint.url: cannot load the JWKS {jwks_path}: {e}"
            ) from None
        self.audience = audience or None
        self.issuer = issuer or None
        self.principal_claim = principal_claim or "sub"
        self.scope_claim = scope_claim or "scope"
        self.skew_seconds = skew_seconds

    def _key(self, kid: str | None) -> jwt.PyJWK:
        keys = self.keys.keys
        if kid is not None:
            for k in keys:
                if k.key_id == kid:
                    return k
            raise InvalidToken(f"no key with kid {kid!r} in the JWKS")
        if len(keys) == 1:
            return keys[0]
        raise InvalidToken("the token names no key (kid) and the JWKS holds several")

    def validate(self, token: str, now_ms: int) -> ValidToken:
        jwt = self.jwt
        try:
            header = jwt.get_unverified_header(token)
            key = self._key(header.get("kid"))
            alg = key.algorithm_name or header.get("alg")
            claims = jwt.decode(
                token,
                key=key,
                algorithms=[alg],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.skew_seconds,
                options={"require": ["exp", "iat", self.principal_claim]},
            )
        except jwt.PyJWTError as e:
            raise InvalidToken(str(e)) from None
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal:
            raise InvalidToken(f"The {self.principal_claim} claim had the incorrect type")
        # PyJWT checks against the wall clock; a token must also be valid at the broker's now
        exp = float(claims["exp"])
        if now_ms - 1000 * self.skew_seconds >= 1000 * exp:
            raise InvalidToken("Signature has expired")
        return ValidToken(principal, int(1000 * exp), _scope(claims, self.scope_claim))


Validator = UnsecuredValidator | JwksValidator

_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def jaas_options(text: str) -> dict[str, str]:
    """The ``name="value"`` options of a JAAS login module line."""
    return {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _JAAS_OPTION.findall(text)}


def build_validator(prop: Callable[[str], str]) -> Validator:
    """The OAUTHBEARER validator of a listener from its properties (see the module docstring)."""
    url = prop("sasl.oauthbearer.jwks.endpoint.url").strip()
    if not url:
        return UnsecuredValidator(jaas_options(prop("oauthbearer.sasl.jaas.config")))
    parsed = urlparse(url)
    if parsed.scheme != "file":
        raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url={url}: only file:// URLs are served")
    audience = [a.strip() for a in prop("sasl.oauthbearer.expected.audience").split(",") if a.strip()]
    skew = prop("sasl.oauthbearer.clock.skew.seconds").strip()
    try:
        skew_seconds = int(skew) if skew else 30
    except ValueError:
        raise ConfigError(f"sasl.oauthbearer.clock.skew.seconds: not an integer: {skew!r}") from None
    return JwksValidator(
        Path(unquote(parsed.path)),
        audience,
        prop("sasl.oauthbearer.expected.issuer").strip() or None,
        prop("sasl.oauthbearer.sub.claim.name").strip(),
        prop("sasl.oauthbearer.scope.claim.name").strip(),
        skew_seconds,
    )
