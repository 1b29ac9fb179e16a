"""SaslAuthenticate (key 36) v0-2: one SASL token each way (after a SaslHandshake v1).

A failed exchange answers SASL_AUTHENTICATION_FAILED with Kafka's message for the mechanism; the
connection then closes (after ``connection.failed.authentication.delay.ms``). On an authenticated
connection, or one that never hand-shook, the answer is ILLEGAL_SASL_STATE. v1+ reports the
session lifetime once the exchange completes (KIP-368: ``connections.max.reauth.ms`` or the
credential's expiry, whichever is sooner; 0 when the session does not expire)."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from broker.security.errors import SaslFailure

from .registry import RequestContext

API_KEY = 36


def handle(ctx: RequestContext, req: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    session = ctx.client.sasl
    if session is None or session.state != "authenticate":
        return SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received after successful authentication",
            auth_bytes=b"",
            session_lifetime_ms=0,
        )
    try:
        token = session.step(bytes(req.auth_bytes), ctx.api_version)
    except SaslFailure as e:
        return SaslAuthenticateResponse(
            error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
            error_message=str(e),
            auth_bytes=b"",
            session_lifetime_ms=0,
        )
    lifetime = session.session_lifetime_ms if session.state == "done" else 0
    return SaslAuthenticateResponse(
        error_code=ErrorCode.NONE, error_message=None, auth_bytes=token, session_lifetime_ms=lifetime
    )
