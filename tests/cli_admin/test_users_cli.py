"""``pykbroker users add|list|delete`` against a running pykbroker (a PLAINTEXT listener for the
commands, a SASL_PLAINTEXT one where the users they create log in with kafka-python)."""

from __future__ import annotations

import orjson
import pytest
import scramp
from click.testing import CliRunner
from kafka import KafkaProducer

from broker.cli import main
from broker.cli_admin.common import EXIT_KAFKA_ERROR, EXIT_UNREACHABLE
from broker.protocol.generated.sasl_authenticate import SaslAuthenticateRequest
from broker.protocol.generated.sasl_handshake import SaslHandshakeRequest
from tests.support.wire import WireClient


@pytest.fixture
def sasl(broker_factory):
    b = broker_factory(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "connection.failed.authentication.delay.ms": 0,
        }
    )
    b.ports = {x.endpoint.name: x.port for x in b.broker.listener.bound}
    return b


@pytest.fixture
def cli(sasl):
    runner = CliRunner()

    def run(*args: str, input: str | None = None, code: int = 0):
        result = runner.invoke(
            main, [*args, "-b", f"127.0.0.1:{sasl.ports['PLAINTEXT']}"], input=input, catch_exceptions=False
        )
        assert result.exit_code == code, (result.stdout, result.stderr)
        return result

    return run


def _produce_as(sasl, user: str, password: str, mechanism: str) -> None:
    p = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{sasl.ports['SASL_PLAINTEXT']}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=password,
        max_block_ms=5000,
    )
    try:
        p.send("users-cli", b"x").get(timeout=10)
    finally:
        p.close()


def _scram_login(sasl, user: str, password: str, mechanism: str) -> int:
    """The error code of a SCRAM exchange on the wire (0: logged in)."""
    client = scramp.ScramClient([mechanism], user, password)
    with WireClient(sasl.ports["SASL_PLAINTEXT"]) as c:
        assert c.call(17, 1, SaslHandshakeRequest(mechanism)).error_code == 0
        first = c.call(36, 2, SaslAuthenticateRequest(client.get_client_first().encode()))
        if first.error_code:
            return first.error_code
        client.set_server_first(bytes(first.auth_bytes).decode())
        return c.call(36, 2, SaslAuthenticateRequest(client.get_client_final().encode())).error_code


def test_users_add_list_delete(cli, sasl):
    out = cli("users", "add", "alice", "--password", "alice-secret", "--iterations", "8192")
    assert "Set the credentials of user alice: SCRAM-SHA-256, SCRAM-SHA-512 (8192 iterations)." in out.stdout
    cli("users", "add", "bob", "-m", "scram-sha-512", input="bob-secret\n")  # the password prompt
    _produce_as(sasl, "alice", "alice-secret", "SCRAM-SHA-256")
    _produce_as(sasl, "bob", "bob-secret", "SCRAM-SHA-512")
    assert orjson.loads(cli("users", "list", "--json").stdout) == [
        {
            "user": "alice",
            "credentials": [
                {"mechanism": "SCRAM-SHA-256", "iterations": 8192},
                {"mechanism": "SCRAM-SHA-512", "iterations": 8192},
            ],
        },
        {"user": "bob", "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}]},
    ]
    table = cli("users", "list", "bob").stdout.splitlines()
    assert table[0].split() == ["USER", "MECHANISM", "ITERATIONS"] and table[1].split() == [
        "bob",
        "SCRAM-SHA-512",
        "4096",
    ]
    missing = cli("users", "list", "carol", code=EXIT_KAFKA_ERROR)
    assert missing.stderr.startswith("error: RESOURCE_NOT_FOUND: Attempt to describe a user credential")
    # a password change applies to the next login
    cli("users", "add", "alice", "--password", "new-secret", "-m", "SCRAM-SHA-256")
    assert _scram_login(sasl, "alice", "new-secret", "SCRAM-SHA-256") == 0
    assert _scram_login(sasl, "alice", "alice-secret", "SCRAM-SHA-256") == 58  # SASL_AUTHENTICATION_FAILED
    assert "Deleted user alice (SCRAM-SHA-256, SCRAM-SHA-512)." in cli("users", "delete", "alice").stdout
    gone = cli("users", "delete", "alice", code=EXIT_KAFKA_ERROR)
    assert gone.stderr.startswith("error: RESOURCE_NOT_FOUND") and gone.stderr.count("\n") == 1
    assert _scram_login(sasl, "alice", "new-secret", "SCRAM-SHA-256") == 58
    assert [u["user"] for u in orjson.loads(cli("users", "list", "--json").stdout)] == ["bob"]


def test_users_bad_usage_and_unreachable(cli):
    assert cli("users", "add", "x", "--password", "p", "--iterations", "100", code=2).exit_code == 2
    runner = CliRunner()
    r = runner.invoke(main, ["users", "list", "-b", "127.0.0.1:1"])
    assert r.exit_code == EXIT_UNREACHABLE and r.stderr.startswith("error: cannot reach the cluster")
