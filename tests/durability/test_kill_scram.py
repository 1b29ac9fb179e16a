"""SCRAM credentials set through AlterUserScramCredentials survive SIGKILL: every change the broker
answered is on disk (fsynced before the answer), a restarted broker (``python -m broker serve``,
killed with SIGKILL right after each answer) authenticates the users it was told about and refuses
the ones deleted, and the file never holds a password."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import scramp

from broker.protocol.generated.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from broker.protocol.generated.sasl_authenticate import SaslAuthenticateRequest
from broker.protocol.generated.sasl_handshake import SaslHandshakeRequest
from broker.security.scram_store import FILE, salted_password
from tests.support.wire import WireClient

from .test_kill import BrokerProcess, _port_below_ephemeral_range


def _wait_listening(b: BrokerProcess, port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if b.listening():
            try:
                WireClient(port, timeout=1).close()
                return
            except OSError:
                pass
        time.sleep(0.05)
    raise AssertionError("broker did not start:\n" + b.logs[-1].read_text()[-3000:])


def _login(port: int, user: str, password: str) -> int:
    client = scramp.ScramClient(["SCRAM-SHA-512"], user, password)
    with WireClient(port) as c:
        assert c.call(17, 1, SaslHandshakeRequest("SCRAM-SHA-512")).error_code == 0
        first = c.call(36, 2, SaslAuthenticateRequest(client.get_client_first().encode()))
        if first.error_code:
            return first.error_code
        client.set_server_first(bytes(first.auth_bytes).decode())
        return c.call(36, 2, SaslAuthenticateRequest(client.get_client_final().encode())).error_code


def _upsert(user: str, password: str) -> ScramCredentialUpsertion:
    salt = os.urandom(24)
    return ScramCredentialUpsertion(
        user, 2, 4096, salt, salted_password("SCRAM-SHA-512", password, salt, 4096)
    )


class SaslBrokerProcess(BrokerProcess):
    """BrokerProcess with a PLAINTEXT and a SASL_PLAINTEXT listener (``listeners``, no ``--port``,
    which would replace them)."""

    def __init__(self, data_dir, log_dir):
        super().__init__(data_dir, log_dir, {"connection.failed.authentication.delay.ms": "0"})
        self.sasl_port = _port_below_ephemeral_range()
        self.configs["listeners"] = (
            f"PLAINTEXT://127.0.0.1:{self.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
        )

    def spawn(self) -> None:
        path = self.log_dir / f"broker-{len(self.logs):03d}.log"
        self.logs.append(path)
        args = [arg for k, v in self.configs.items() for arg in ("--config", f"{k}={v}")]
        with open(path, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "broker", "serve", "--data-dir", str(self.data_dir), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
            )


@pytest.fixture
def proc(tmp_path):
    b = SaslBrokerProcess(tmp_path / "data", tmp_path)
    yield b
    b.cleanup()


def test_credentials_survive_sigkill(proc):
    expected: dict[str, str | None] = {}  # user -> password, None once deleted
    for round_ in range(4):
        proc.spawn()
        _wait_listening(proc, proc.sasl_port)
        for user, password in expected.items():  # what earlier (killed) brokers answered
            code = _login(proc.sasl_port, user, password or "gone")
            assert code == (0 if password is not None else 58), (round_, user, code)
        user = f"user{round_}"
        # (spaces: no base64 text of the file's salts and keys can hold it by chance, as "pw1" could)
        password = f"password of round {round_}"
        with WireClient(proc.port) as c:
            dels = [ScramCredentialDeletion(f"user{round_ - 2}", 2)] if round_ >= 2 else []
            resp = c.call(51, 0, AlterUserScramCredentialsRequest(dels, [_upsert(user, password)]))
        assert all(r.error_code == 0 for r in resp.results), resp
        proc.kill()  # at once: only what was durable before the answer can be there
        expected[user] = password
        for d in dels:
            expected[d.name] = None
    text = (proc.data_dir / FILE).read_text()
    assert not any(p and p in text for p in expected.values())
