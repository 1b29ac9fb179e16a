"""The pre-authentication gate under fuzzing: on a SASL listener, frames sent before the client has
authenticated (mutated requests of every API, garbage, bare bytes after a SaslHandshake v0) reach no
handler but ApiVersions, SaslHandshake and SaslAuthenticate, and every outcome is an answer or a
close, never an exception. Runs the broker's own pipeline without sockets (tests/support/inprocess)."""

from __future__ import annotations

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from broker.dispatch.registry import ClientInfo
from broker.protocol.generated.api_versions import ApiVersionsRequest
from broker.protocol.generated.metadata import MetadataRequest
from broker.protocol.generated.sasl_authenticate import SaslAuthenticateRequest
from broker.protocol.generated.sasl_handshake import SaslHandshakeRequest
from broker.server.pipeline import Close, Pending
from tests.fuzz.harness import FUZZ, any_frame
from tests.support.inprocess import InProcessBroker
from tests.support.wire import request_bytes

pytestmark = pytest.mark.fuzz

ALLOWED = {17, 18, 36}


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    b = InProcessBroker(
        tmp_path_factory.mktemp("gate"),
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.users": "alice:secret",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,OAUTHBEARER",
        },
    )
    called: list[int] = []
    for api in b.pipeline.registry.apis.values():

        def spy(ctx, req, _h=api.handler, _k=api.key):
            called.append(_k)
            return _h(ctx, req)

        api.handler = spy
    auth = b.broker.listener.security["SASL_PLAINTEXT"].sasl
    yield b, auth, called
    b.stop()


# a handshake first (v0: the frames after it are bare tokens; v1: SaslAuthenticate is allowed)
prefixes = st.sampled_from(
    [
        None,
        *(
            request_bytes(17, v, SaslHandshakeRequest(m))[4:]
            for v in (0, 1)
            for m in ("PLAIN", "SCRAM-SHA-256", "OAUTHBEARER")
        ),
        request_bytes(18, 3, ApiVersionsRequest("fuzz", "1"))[4:],
    ]
)


@settings(FUZZ, max_examples=600)
@given(prefix=prefixes, frames=st.lists(any_frame, min_size=1, max_size=4))
def test_no_frame_before_authentication_reaches_another_handler(gated, prefix, frames):
    b, auth, called = gated
    called.clear()
    client = ClientInfo(peer="fuzz", listener="SASL_PLAINTEXT", security_protocol="SASL_PLAINTEXT")
    client.sasl = auth.session()
    stream = ([prefix] if prefix else []) + frames
    for frame in stream:
        note(frame.hex())
        out = b.pipeline.handle_unauthenticated(frame, client)
        assert out is None or type(out) in (bytes, Close, Pending), out
        if client.sasl.principal is not None or type(out) is Close or client.sasl.failed:
            break
    assert set(called) <= ALLOWED, called


def test_the_spy_sees_handlers_once_authenticated(gated):
    """The check above can fail: after authenticating, a Metadata request does reach its handler."""
    b, auth, called = gated
    called.clear()
    client = ClientInfo(peer="t", listener="SASL_PLAINTEXT", security_protocol="SASL_PLAINTEXT")
    client.sasl = auth.session()
    metadata = request_bytes(3, 4, MetadataRequest(topics=[], allow_auto_topic_creation=False))[4:]
    assert type(b.pipeline.handle_unauthenticated(metadata, client)) is Close
    for frame in (
        request_bytes(17, 1, SaslHandshakeRequest("PLAIN"))[4:],
        request_bytes(36, 1, SaslAuthenticateRequest(b"\x00alice\x00secret"))[4:],
    ):
        assert type(b.pipeline.handle_unauthenticated(frame, client)) is bytes
    assert client.sasl.principal == "User:alice" and called == [17, 36]
    assert type(b.pipeline.handle(metadata, client)) is bytes
    assert called == [17, 36, 3]
