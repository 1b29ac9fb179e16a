"""SASL cost: connect + authenticate on a SASL_PLAINTEXT listener per mechanism (PLAIN, SCRAM-SHA-512,
OAUTHBEARER with an unsecured token), frame by frame over TCP, and AlterUserScramCredentials (each
answer waits for the credentials file's fsync), against one in-process broker in one run.

    python bench/sasl_bench.py [--n 200]

Prints the median (and p95) of each and each mechanism's ratio to PLAIN. SCRAM's time is mostly the
client's own PBKDF2 (4096 iterations, scramp): the client runs in this process. No bar: a note for
the README.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import scramp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.protocol.generated.alter_user_scram_credentials import (  # noqa: E402
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from broker.protocol.generated.sasl_authenticate import SaslAuthenticateRequest  # noqa: E402
from broker.protocol.generated.sasl_handshake import SaslHandshakeRequest  # noqa: E402
from broker.security.scram_store import salted_password  # noqa: E402
from broker.testing import running_broker  # noqa: E402
from tests.support.wire import WireClient  # noqa: E402

CONFIG = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.users": "alice:alice-secret",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER",
}


def _b64(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def login(port: int, mech: str) -> None:
    with WireClient(port) as c:
        assert c.call(17, 1, SaslHandshakeRequest(mech)).error_code == 0
        if mech == "PLAIN":
            r = c.call(36, 2, SaslAuthenticateRequest(b"\x00alice\x00alice-secret"))
        elif mech == "OAUTHBEARER":
            token = _b64({"alg": "none"}) + "." + _b64({"sub": "alice", "exp": time.time() + 60}) + "."
            r = c.call(36, 2, SaslAuthenticateRequest(f"n,,\x01auth=Bearer {token}\x01\x01".encode()))
        else:
            client = scramp.ScramClient([mech], "alice", "alice-secret")
            first = c.call(36, 2, SaslAuthenticateRequest(client.get_client_first().encode()))
            client.set_server_first(bytes(first.auth_bytes).decode())
            r = c.call(36, 2, SaslAuthenticateRequest(client.get_client_final().encode()))
        assert r.error_code == 0, r


def timed(fn, n: int) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t)
    return sorted(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    n = ap.parse_args().n
    with running_broker(Path(tempfile.mkdtemp()), CONFIG) as b:
        ports = {x.endpoint.name: x.port for x in b.broker.listener.bound}
        results = {
            m: timed(lambda _i, m=m: login(ports["SASL_PLAINTEXT"], m), n)
            for m in ("PLAIN", "SCRAM-SHA-512", "OAUTHBEARER")
        }
        with WireClient(ports["PLAINTEXT"]) as c:

            def alter(i: int) -> None:
                salt = os.urandom(24)
                up = ScramCredentialUpsertion(
                    f"u{i}", 2, 4096, salt, salted_password("SCRAM-SHA-512", "pw", salt, 4096)
                )
                assert c.call(51, 0, AlterUserScramCredentialsRequest([], [up])).results[0].error_code == 0

            results["AlterUserScramCredentials"] = timed(alter, n)
    base = statistics.median(results["PLAIN"])
    for name, lat in results.items():
        med = statistics.median(lat)
        ratio = f"  {med / base:.1f}x PLAIN" if name != "AlterUserScramCredentials" else ""
        print(
            f"{name:28s} median {med * 1000:7.2f} ms  p95 {lat[int(len(lat) * 0.95) - 1] * 1000:7.2f} ms{ratio}"
        )


if __name__ == "__main__":
    main()
