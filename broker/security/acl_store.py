"""The ACLs of a broker with an authorizer, kept in ``<data dir>/acls.json``.

CreateAcls and DeleteAcls change them through :meth:`AclStore.create` / :meth:`AclStore.delete`:
the whole file is rewritten atomically and durably (temporary file, fsync, rename, directory fsync)
before the change is applied and answered, so an acknowledged change survives a crash (SIGKILL
included), and a change that was not written is not applied. A start replays the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from broker.datadir import write_durably

from .authorizer import AclBinding, AclFilter, Authorizer, validate_new_acl

FILE = "acls.json"
FORMAT_VERSION = 1


class AclStoreError(ValueError):
    """The ACL file cannot be read (the broker refuses to start rather than lose ACLs)."""


class AclStore:
    def __init__(self, data_dir: Path | None, authorizer: Authorizer):
        self.path = None if data_dir is None else Path(data_dir) / FILE
        self.authorizer = authorizer
        if self.path is not None and self.path.exists():
            authorizer.replace(_load(self.path))

    @property
    def acls(self) -> list[AclBinding]:
        return list(self.authorizer.acls)

    def describe(self, flt: AclFilter) -> list[AclBinding]:
        """Every ACL the filter matches, in creation order."""
        return [acl for acl in self.authorizer.acls if flt.matches(acl)]

    def create(self, acls: Iterable[AclBinding]) -> list[str | None]:
        """Add each valid ACL (one already present is kept once); per ACL, None or the reason it
        was refused (INVALID_REQUEST). One durable write for the whole batch."""
        current = dict(self.authorizer.acls)
        results: list[str | None] = []
        for acl in acls:
            reason = validate_new_acl(acl)
            results.append(reason)
            if reason is None:
                current.setdefault(acl, None)
        if len(current) != len(self.authorizer.acls):
            self._commit(current)
        return results

    def delete(self, filters: Iterable[AclFilter]) -> list[tuple[str | None, list[AclBinding]]]:
        """Per filter: (the reason it is invalid, or None; the ACLs it deleted). An ACL matched by
        several filters is reported by each. One durable write for the whole request."""
        current = dict(self.authorizer.acls)
        results: list[tuple[str | None, list[AclBinding]]] = []
        for flt in filters:
            if flt.pattern_unknown():
                results.append(("Unknown patternFilter.", []))
                continue
            if flt.entry_unknown():
                results.append(("Unknown entryFilter.", []))
                continue
            matched = [acl for acl in self.authorizer.acls if flt.matches(acl)]
            for acl in matched:
                current.pop(acl, None)
            results.append((None, matched))
        if len(current) != len(self.authorizer.acls):
            self._commit(current)
        return results

    def _commit(self, acls: dict[AclBinding, None]) -> None:
        if self.path is not None:
            _save(self.path, list(acls))
        self.authorizer.replace(acls)


def _load(path: Path) -> list[AclBinding]:
    try:
        doc = json.loads(path.read_text())
        if doc.get("version") != FORMAT_VERSION:
            raise AclStoreError(f"{path}: unknown format version {doc.get('version')!r}")
        return [AclBinding(*entry) for entry in doc["acls"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        if isinstance(e, AclStoreError):
            raise
        raise AclStoreError(f"{path}: cannot read the ACLs: {e}") from e


def _save(path: Path, acls: list[AclBinding]) -> None:
    doc = {"version": FORMAT_VERSION, "acls": [list(acl) for acl in acls]}
    write_durably(path, json.dumps(doc, separators=(",", ":")).encode())
