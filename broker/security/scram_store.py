"""SCRAM credentials: what SCRAM authentication checks a client against, and what
DescribeUserScramCredentials / AlterUserScramCredentials (KIP-554) read and change.

A credential is Kafka's: per user and mechanism the salt, the stored key, the server key and the
iteration count (RFC 5802). The password itself is never kept: ``sasl.users`` passwords are salted
at start-up, and AlterUserScramCredentials carries a salted password that is turned into the two
keys at once (as Kafka's ScramControlManager does) and dropped.

Credentials changed through the API are kept in ``<data dir>/scram-credentials.json``, written
whole, atomically and durably (temporary file, fsync, rename, directory fsync) before the change is
answered or used. At start the file is laid over the ``sasl.users`` credentials: a user and
mechanism it holds is the file's (the API's last word), a user deleted through the API stays
deleted (the file records the deletion) even when ``sasl.users`` still names it.

Validation follows Kafka's controller (ScramControlManager) and metadata image (ScramImage):
an empty name is UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM,
iterations outside 4096..16384 UNACCEPTABLE_CREDENTIAL, a user named twice in one request
DUPLICATE_RESOURCE, deleting or describing a credential that does not exist RESOURCE_NOT_FOUND.
"""

from __future__ import annotations

import base64
import importlib
import json
import threading
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

from broker.datadir import write_durably
from broker.protocol.errors import ErrorCode

FILE = "scram-credentials.json"

#: Kafka's ScramMechanism type codes (org.apache.kafka.clients.admin.ScramMechanism)
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_OF = {name: code for code, name in MECHANISM_TYPES.items()}
#: the hash of each mechanism (its hashlib name)
_HASH = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}

#: Kafka's ScramMechanism.minIterations and ScramControlManager.MAX_ITERATIONS
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384

#: (salt, stored key, server key, iterations): what scramp's server lookup returns
AuthInfo = tuple[bytes, bytes, bytes, int]


def _hashing() -> tuple[ModuleType, ModuleType]:
    """hashlib and hmac, imported on first use: only SCRAM credentials need them, and their import
    (OpenSSL's hash bindings, ~1.7 ms) is not paid by a broker start without any."""
    return importlib.import_module("hashlib"), importlib.import_module("hmac")


def keys_from_salted_password(mechanism: str, salted_password: bytes) -> tuple[bytes, bytes]:
    """RFC 5802: StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword,
    "Server Key")."""
    hash_module, hmac_module = _hashing()
    hf = getattr(hash_module, _HASH[mechanism])
    client_key = hmac_module.new(salted_password, b"Client Key", hf).digest()
    return hf(client_key).digest(), hmac_module.new(salted_password, b"Server Key", hf).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with the mechanism's HMAC (what a client sends in an upsertion)."""
    hash_module, _hmac_module = _hashing()
    return hash_module.pbkdf2_hmac(_HASH[mechanism], password.encode(), salt, iterations)


class Deletion(NamedTuple):  # not a dataclass: see broker.config.Setting
    """An AlterUserScramCredentials deletion: a user's credential of one mechanism."""

    name: str
    mechanism: int


class Upsertion(NamedTuple):
    """An AlterUserScramCredentials upsertion: a user's salted password for one mechanism."""

    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


class ScramCredentials:
    """Every SCRAM credential of the broker. ``users[mechanism][name]`` is what authentication looks
    up (the dict objects are shared with the listeners' authenticators and changed in place, so a
    change applies to the next authentication)."""

    def __init__(self, initial: dict[str, dict[str, AuthInfo]] | None = None):
        self.users: dict[str, dict[str, AuthInfo]] = {m: {} for m in TYPE_OF}
        for mech, users in (initial or {}).items():
            self.users.setdefault(mech, {}).update(users)
        self.path: Path | None = None
        #: (mechanism, name) pairs deleted through the API (kept so sasl.users does not bring them back)
        self.deleted: set[tuple[str, str]] = set()
        #: (mechanism, name) pairs set through the API (the file's content)
        self.stored: dict[tuple[str, str], AuthInfo] = {}
        self._lock = threading.Lock()

    def open(self, data_dir: Path) -> None:
        """Lay the credentials of ``data_dir`` (if any) over the configured ones; later changes
        are written there."""
        self.path = Path(data_dir) / FILE
        if not self.path.exists():
            return
        doc = json.loads(self.path.read_text())
        for item in doc.get("deleted", []):
            mech, name = item["mechanism"], item["name"]
            self.deleted.add((mech, name))
            self.users.get(mech, {}).pop(name, None)
        for item in doc.get("credentials", []):
            mech, name = item["mechanism"], item["name"]
            info = (
                base64.b64decode(item["salt"]),
                base64.b64decode(item["stored_key"]),
                base64.b64decode(item["server_key"]),
                int(item["iterations"]),
            )
            self.stored[(mech, name)] = info
            self.users.setdefault(mech, {})[name] = info

    # ------------------------------------------------------------------ Describe

    def describe(
        self, names: Iterable[str] | None
    ) -> list[tuple[str, int, str | None, list[tuple[int, int]]]]:
        """DescribeUserScramCredentials: per user (name, error, message, [(mechanism type, iterations)])
        as Kafka's ScramImage.describe answers (every user that has a credential when ``names`` is
        None or empty)."""
        wanted: dict[str, bool] = {}  # name -> named twice
        if not names:
            for users in self.users.values():
                for name in users:
                    wanted[name] = False
        else:
            for name in names:
                wanted[name] = name in wanted
        out = []
        for name, duplicate in wanted.items():
            if duplicate:
                out.append(
                    (
                        name,
                        int(ErrorCode.DUPLICATE_RESOURCE),
                        "Cannot describe SCRAM credentials for the same user twice in a single request: "
                        + name,
                        [],
                    )
                )
                continue
            infos = [(TYPE_OF[m], users[name][3]) for m, users in self.users.items() if name in users]
            if infos:
                out.append((name, 0, None, infos))
            else:
                out.append(
                    (
                        name,
                        int(ErrorCode.RESOURCE_NOT_FOUND),
                        "Attempt to describe a user credential that does not exist: " + name,
                        [],
                    )
                )
        return out

    # ------------------------------------------------------------------ Alter

    def alter(
        self, deletions: list[Deletion], upsertions: list[Upsertion]
    ) -> list[tuple[str, int, str | None]]:
        """AlterUserScramCredentials: validate as Kafka's ScramControlManager.alterCredentials, apply
        the valid changes, write them durably (OSError propagates: nothing is applied then) and
        answer (user, error code, message) per user: deletions, upsertions, then the failures."""
        errors: dict[str, tuple[int, str]] = {}
        to_delete: dict[str, Deletion] = {}
        to_upsert: dict[str, Upsertion] = {}
        dup = (
            int(ErrorCode.DUPLICATE_RESOURCE),
            "A user credential cannot be altered twice in the same request",
        )
        for d in deletions:
            if d.name in errors:
                continue
            if to_delete.pop(d.name, None) is not None:
                errors[d.name] = dup
                continue
            err = _check_name_and_mechanism(d.name, d.mechanism)
            if err is None and d.name not in self.users.get(MECHANISM_TYPES[d.mechanism], {}):
                err = (
                    int(ErrorCode.RESOURCE_NOT_FOUND),
                    "Attempt to delete a user credential that does not exist",
                )
            if err is not None:
                errors[d.name] = err
            else:
                to_delete[d.name] = d
        for u in upsertions:
            if u.name in errors:
                continue
            if to_delete.pop(u.name, None) is not None or to_upsert.pop(u.name, None) is not None:
                errors[u.name] = dup
                continue
            err = _check_name_and_mechanism(u.name, u.mechanism)
            if err is None and u.iterations < MIN_ITERATIONS:
                err = (int(ErrorCode.UNACCEPTABLE_CREDENTIAL), "Too few iterations")
            elif err is None and u.iterations > MAX_ITERATIONS:
                err = (int(ErrorCode.UNACCEPTABLE_CREDENTIAL), "Too many iterations")
            if err is not None:
                errors[u.name] = err
            else:
                to_upsert[u.name] = u
        with self._lock:
            stored, deleted = dict(self.stored), set(self.deleted)
            changes: list[tuple[str, str, AuthInfo | None]] = []
            for d in to_delete.values():
                mech = MECHANISM_TYPES[d.mechanism]
                stored.pop((mech, d.name), None)
                deleted.add((mech, d.name))
                changes.append((mech, d.name, None))
            for u in to_upsert.values():
                mech = MECHANISM_TYPES[u.mechanism]
                stored_key, server_key = keys_from_salted_password(mech, u.salted_password)
                info = (bytes(u.salt), stored_key, server_key, u.iterations)
                stored[(mech, u.name)] = info
                deleted.discard((mech, u.name))
                changes.append((mech, u.name, info))
            if changes and self.path is not None:
                _save(self.path, stored, deleted)
            self.stored, self.deleted = stored, deleted
            for mech, name, info in changes:  # in place: the authenticators hold these dicts
                if info is None:
                    self.users[mech].pop(name, None)
                else:
                    self.users[mech][name] = info
        out: list[tuple[str, int, str | None]] = [(n, 0, None) for n in to_delete]
        out += [(n, 0, None) for n in to_upsert]
        out += [(n, code, msg) for n, (code, msg) in errors.items()]
        return out


def _check_name_and_mechanism(name: str, mechanism: int) -> tuple[int, str] | None:
    if not name:
        return int(ErrorCode.UNACCEPTABLE_CREDENTIAL), "Username must not be empty"
    if mechanism not in MECHANISM_TYPES:
        return int(ErrorCode.UNSUPPORTED_SASL_MECHANISM), "Unknown SCRAM mechanism"
    return None


def _save(path: Path, stored: dict[tuple[str, str], AuthInfo], deleted: set[tuple[str, str]]) -> None:
    """Written whole, atomically and durably (temp file, fsync, rename, directory fsync)."""

    def b64(b: bytes) -> str:
        return base64.b64encode(b).decode()

    doc = {
        "version": 1,
        "credentials": [
            {
                "name": name,
                "mechanism": mech,
                "salt": b64(info[0]),
                "stored_key": b64(info[1]),
                "server_key": b64(info[2]),
                "iterations": info[3],
            }
            for (mech, name), info in sorted(stored.items())
        ],
        "deleted": [{"name": name, "mechanism": mech} for mech, name in sorted(deleted)],
    }
    write_durably(path, json.dumps(doc, indent=1).encode(), mode=0o600)
