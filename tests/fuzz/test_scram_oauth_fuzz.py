"""Fuzzing the SCRAM credential APIs and OAUTHBEARER (issue 16), without sockets (the broker's own
pipeline, tests/support/inprocess):

* random AlterUserScramCredentials requests (names, mechanisms, iterations, salts, duplicates)
  against a model of Kafka's rules: one result per user named, only the codes Kafka's controller
  uses, DescribeUserScramCredentials agreeing with the model, and a restarted broker reading back
  the same credentials;
* random OAUTHBEARER client messages and tokens (mutated GS2 headers, kvpairs, JWS parts, claims):
  every outcome is a server token or a SASL failure, never an exception, and only a token that is
  valid for the model authenticates.
"""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from broker.config import Config
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from broker.protocol.generated.describe_user_scram_credentials import DescribeUserScramCredentialsRequest
from broker.security.listeners import listener_security
from broker.security.sasl import SaslFailure
from broker.security.scram_store import MAX_ITERATIONS, MIN_ITERATIONS, TYPE_OF, Deletion, ScramCredentials
from tests.fuzz.harness import FUZZ
from tests.support.inprocess import InProcessBroker

pytestmark = pytest.mark.fuzz

NAMES = st.sampled_from(["alice", "bob", "", "é☃", "x" * 300, "a=b,c"])
MECHS = st.sampled_from([1, 2, 0, 3, -1, 127])
ITERATIONS = st.sampled_from(
    [MIN_ITERATIONS, 8192, MAX_ITERATIONS, MIN_ITERATIONS - 1, MAX_ITERATIONS + 1, 0, -1, 2**31 - 1]
)
deletions = st.lists(st.builds(ScramCredentialDeletion, NAMES, MECHS), max_size=4)
upsertions = st.lists(
    st.builds(
        ScramCredentialUpsertion, NAMES, MECHS, ITERATIONS, st.binary(max_size=32), st.binary(max_size=64)
    ),
    max_size=4,
)
ALTER_CODES = {
    0,
    ErrorCode.DUPLICATE_RESOURCE,
    ErrorCode.UNACCEPTABLE_CREDENTIAL,
    ErrorCode.RESOURCE_NOT_FOUND,
    ErrorCode.UNSUPPORTED_SASL_MECHANISM,
}


@pytest.fixture(scope="module")
def scram_broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("scram")
    b = InProcessBroker(d)
    yield b, d
    b.stop()


def _model_apply(model: dict[tuple[str, int], int], dels, ups) -> dict[str, int]:
    """Kafka's ScramControlManager.alterCredentials on ``model`` ((user, mechanism) -> iterations):
    the expected code per user."""
    errors: dict[str, int] = {}
    to_del: dict[str, ScramCredentialDeletion] = {}
    to_up: dict[str, ScramCredentialUpsertion] = {}
    for d in dels:
        if d.name in errors:
            continue
        if to_del.pop(d.name, None) is not None:
            errors[d.name] = ErrorCode.DUPLICATE_RESOURCE
        elif not d.name:
            errors[d.name] = ErrorCode.UNACCEPTABLE_CREDENTIAL
        elif d.mechanism not in (1, 2):
            errors[d.name] = ErrorCode.UNSUPPORTED_SASL_MECHANISM
        elif (d.name, d.mechanism) not in model:
            errors[d.name] = ErrorCode.RESOURCE_NOT_FOUND
        else:
            to_del[d.name] = d
    for u in ups:
        if u.name in errors:
            continue
        if to_del.pop(u.name, None) is not None or to_up.pop(u.name, None) is not None:
            errors[u.name] = ErrorCode.DUPLICATE_RESOURCE
        elif not u.name:
            errors[u.name] = ErrorCode.UNACCEPTABLE_CREDENTIAL
        elif u.mechanism not in (1, 2):
            errors[u.name] = ErrorCode.UNSUPPORTED_SASL_MECHANISM
        elif not MIN_ITERATIONS <= u.iterations <= MAX_ITERATIONS:
            errors[u.name] = ErrorCode.UNACCEPTABLE_CREDENTIAL
        else:
            to_up[u.name] = u
    for d in to_del.values():
        del model[(d.name, d.mechanism)]
    for u in to_up.values():
        model[(u.name, u.mechanism)] = u.iterations
    return {**{n: 0 for n in to_del}, **{n: 0 for n in to_up}, **errors}


@settings(FUZZ, max_examples=200)
@given(steps=st.lists(st.tuples(deletions, upsertions), min_size=1, max_size=5))
def test_alter_and_describe_follow_kafkas_rules(scram_broker, steps):
    b, data_dir = scram_broker
    b.call(lambda: _reset(b.broker.services.scram))
    model: dict[tuple[str, int], int] = {}
    with b.client() as c:
        for dels, ups in steps:
            note(f"deletions={dels} upsertions={ups}")
            expected = _model_apply(model, dels, ups)
            resp = c.call(51, 0, AlterUserScramCredentialsRequest(deletions=dels, upsertions=ups))
            got = {r.user: r.error_code for r in resp.results}
            assert len(got) == len(resp.results)  # one result per user
            assert set(got.values()) <= ALTER_CODES
            assert got == expected
        described = c.call(50, 0, DescribeUserScramCredentialsRequest(users=None))
    seen = {(r.user, i.mechanism): i.iterations for r in described.results for i in r.credential_infos}
    assert seen == model
    assert all(r.error_code == 0 for r in described.results)
    again = ScramCredentials()  # what a restarted broker reads
    again.open(data_dir)
    assert {
        (n, {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}[m]): info[3]
        for m, users in again.users.items()
        for n, info in users.items()
    } == model


def _reset(store: ScramCredentials) -> None:
    """Delete every credential through the store (the broker's own path, durably)."""
    for mech, users in list(store.users.items()):
        for name in list(users):
            store.alter([Deletion(name, TYPE_OF[mech])], [])


# ------------------------------------------------------------------------------------- OAUTHBEARER


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


NOW_MS = 1_700_000_000_000
claims = st.fixed_dictionaries(
    {},
    optional={
        "sub": st.one_of(st.sampled_from(["alice", "", " "]), st.integers(), st.none()),
        "exp": st.one_of(
            st.sampled_from([NOW_MS / 1000 + 60, NOW_MS / 1000 - 60, NOW_MS / 1000]),
            st.text(max_size=3),
            st.booleans(),
            st.floats(allow_nan=True),
        ),
        "iat": st.one_of(
            st.sampled_from([NOW_MS / 1000 - 10, NOW_MS / 1000 + 600]), st.none(), st.text(max_size=2)
        ),
        "scope": st.one_of(
            st.text(max_size=10), st.lists(st.one_of(st.text(max_size=5), st.integers()), max_size=3)
        ),
    },
)
headers = st.sampled_from([{"alg": "none"}, {"alg": "HS256"}, {}, {"alg": None}, {"alg": "none", "kid": "x"}])


@st.composite
def client_messages(draw) -> bytes:
    head = _b64(json.dumps(draw(headers)).encode()) if draw(st.booleans()) else draw(st.text(max_size=8))
    body = (
        _b64(json.dumps(draw(claims), default=str).encode())
        if draw(st.booleans())
        else _b64(draw(st.binary(max_size=20)))
    )
    sig = draw(st.sampled_from(["", "", "c2ln", "!!"]))
    token = f"{head}.{body}.{sig}"
    gs2 = draw(st.sampled_from(["n,,", "n,a=alice,", "y,,", "n,a=,", "p=x,,", ""]))
    ext = draw(st.sampled_from(["", "traceId=1\x01", "auth=x\x01", "bad key=1\x01", "k=\x7f\x01"]))
    scheme = draw(st.sampled_from(["Bearer", "bearer", "Basic", ""]))
    msg = f"{gs2}\x01auth={scheme} {token}\x01{ext}\x01"
    raw = msg.encode("utf-8", "surrogatepass")
    if draw(st.booleans()):  # mutate a few bytes
        pos = draw(st.integers(0, max(0, len(raw) - 1)))
        raw = raw[:pos] + draw(st.binary(max_size=3)) + raw[pos + 1 :]
    return raw


@pytest.fixture(scope="module")
def oauth_auth():
    c = Config({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER"})
    auth = listener_security(c, c.endpoints())["SASL_PLAINTEXT"].sasl
    auth.clock = lambda: NOW_MS
    return auth


@settings(FUZZ, max_examples=1500)
@given(first=client_messages(), then=st.sampled_from([b"\x01", b"", b"\x01\x01", None]))
def test_oauthbearer_messages_authenticate_or_fail_cleanly(oauth_auth, first, then):
    note(repr(first))
    s = oauth_auth.session()
    assert s.handshake("OAUTHBEARER", 1)
    try:
        out = s.step(first, 2)
    except SaslFailure:
        assert s.failed and s.principal is None
        return
    if s.state == "done":
        assert s.principal and s.principal.startswith("User:") and s.principal != "User:"
        assert 0 < s.session_lifetime_ms  # only unexpired tokens authenticate
        return
    assert out.startswith(b'{"status":"')  # the JSON error; the client acknowledges it with \x01
    json.loads(out)
    if then is None:
        return
    try:
        s.step(then, 2)
    except SaslFailure:
        assert s.failed
        return
    assert s.state != "done"  # an acknowledgement never authenticates


def test_the_fuzz_can_authenticate(oauth_auth):
    """The check above reaches success: a well-formed unsecured token authenticates."""
    s = oauth_auth.session()
    s.handshake("OAUTHBEARER", 1)
    token = (
        _b64(b'{"alg":"none"}')
        + "."
        + _b64(json.dumps({"sub": "alice", "exp": NOW_MS / 1000 + 60}).encode())
        + "."
    )
    assert s.step(f"n,,\x01auth=Bearer {token}\x01\x01".encode(), 2) == b"" and s.principal == "User:alice"
