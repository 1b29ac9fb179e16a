"""SaslHandshake (key 17) v0-1: the client names its SASL mechanism.

Only a connection on a SASL listener that has not authenticated yet may hand-shake (the server's
pre-authentication gate, ``RequestPipeline.handle_unauthenticated``, lets it through); anywhere
else the answer is ILLEGAL_SASL_STATE, as Kafka's. An unknown mechanism gets
UNSUPPORTED_SASL_MECHANISM with the listener's mechanisms, then the connection closes."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

from .registry import RequestContext

API_KEY = 17


def handle(ctx: RequestContext, req: SaslHandshakeRequest) -> SaslHandshakeResponse:
    session = ctx.client.sasl
    if session is None or session.state != "handshake":
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    mechanisms = list(session.auth.mechanisms)
    if not session.handshake(req.mechanism, ctx.api_version):
        return SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=mechanisms)
    return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=mechanisms)
