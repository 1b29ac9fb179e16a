"""The SASL mechanisms (scramp with asn1crypto, the OAUTHBEARER validator, PyJWT) load only when the
configuration uses SASL: a PLAINTEXT broker's start-up imports none of them (start-up time, issue
19), and a SASL configuration still gets them through broker.security.listeners."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("scramp", "asn1crypto", "jwt", "broker.security.sasl", "broker.security.oauth")

# everything `python -m broker serve` imports before it listens, then the listeners' security built
# from the configuration given as argv[1] (no socket is opened)
PROBE = """
import json, sys
import broker.cli, broker.app, broker.server.listener
from broker.config import Config
from broker.security.listeners import configured_scram, listener_security
config = Config(json.loads(sys.argv[1]))
scram = configured_scram(config)
security = listener_security(config, config.endpoints(), scram)
print(json.dumps({
    "loaded": sorted(m for m in sys.modules if m.split(".")[0] in {"scramp", "asn1crypto", "jwt"}
                     or m in {"broker.security.sasl", "broker.security.oauth"}),
    "sasl": {name: s.sasl is not None for name, s in security.items()},
    "users": sorted(scram.users.get("SCRAM-SHA-256", {})),
}))
"""


def probe(config: dict[str, str]) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def test_plaintext_broker_imports_no_sasl_mechanism():
    got = probe({"log.dirs": "/nonexistent"})
    assert got["loaded"] == []
    assert got["sasl"] == {"PLAINTEXT": False}
    assert got["users"] == []


def test_sasl_listener_loads_the_mechanisms_at_configuration():
    got = probe(
        {
            "listeners": "PLAINTEXT://127.0.0.1:1,SASL_PLAINTEXT://127.0.0.1:2",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "sasl.users": "alice:alice-secret",
        }
    )
    assert {"scramp", "broker.security.sasl"} <= set(got["loaded"])
    assert got["sasl"] == {"PLAINTEXT": False, "SASL_PLAINTEXT": True}
    assert got["users"] == ["alice"]


def test_sasl_users_without_a_sasl_listener_are_salted():
    got = probe({"sasl.users": "bob:pw"})
    assert "scramp" in got["loaded"]
    assert got["users"] == ["bob"]
