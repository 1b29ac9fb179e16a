"""``pykbroker users add|list|delete``: SCRAM users (KIP-554) through DescribeUserScramCredentials and
AlterUserScramCredentials, sent with the project's codecs (``wire.call``) to the first bootstrap
server (any broker of a Kafka cluster forwards them to its controller).

The password never leaves this process in clear: it is salted here (a random 24-byte salt, RFC
5802's Hi() with ``--iterations``) and only the salted password is sent, as Kafka's
``kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[password=...]'`` does.
"""

from __future__ import annotations

import os
from typing import Any

import click

from broker.cli_admin.common import (
    EXIT_UNREACHABLE,
    AdminGroup,
    CommandError,
    connection_options,
    emit_json,
    table,
)
from broker.cli_admin.wire import _host_port, call
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from broker.protocol.generated.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from broker.security.scram_store import MECHANISM_TYPES, TYPE_OF, salted_password

DESCRIBE, ALTER = 50, 51
MECHANISMS = click.Choice(sorted(TYPE_OF), case_sensitive=False)


@click.group(cls=AdminGroup)
def users() -> None:
    """SCRAM users: add (or change a password), list, delete."""


def _call(bootstrap: str, timeout: float, api_key: int, body: Any) -> Any:
    host, port = _host_port(bootstrap)
    try:
        return call(host, port, api_key, 0, body, timeout)
    except TimeoutError as e:
        raise CommandError(f"timed out: {e or 'no answer'}", EXIT_UNREACHABLE) from None
    except OSError as e:
        raise CommandError(f"cannot reach the cluster: {e}", EXIT_UNREACHABLE) from None


def _error(code: int, message: str | None, user: str) -> str:
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    return f"{name}: {message or name} (user {user!r})"


def _alter(bootstrap: str, timeout: float, request: AlterUserScramCredentialsRequest) -> list[str]:
    resp = _call(bootstrap, timeout, ALTER, request)
    return [_error(r.error_code, r.error_message, r.user) for r in resp.results if r.error_code]


@users.command("add")
@connection_options
@click.argument("name")
@click.option(
    "--password",
    prompt=True,
    hide_input=True,
    help="The password (asked for when not given; read from stdin when it is not a terminal).",
)
@click.option(
    "--mechanism",
    "-m",
    "mechanisms",
    type=MECHANISMS,
    multiple=True,
    help="SCRAM mechanism (repeatable; default: SCRAM-SHA-256 and SCRAM-SHA-512).",
)
@click.option(
    "--iterations",
    type=click.IntRange(4096, 16384),
    default=4096,
    show_default=True,
    help="Salting iterations (Kafka accepts 4096-16384).",
)
def add(
    bootstrap: str,
    timeout: float,
    as_json: bool,
    name: str,
    password: str,
    mechanisms: tuple[str, ...],
    iterations: int,
) -> None:
    """Create user NAME, or change its password (an upsertion per mechanism)."""
    mechs = [m.upper() for m in mechanisms] or sorted(TYPE_OF)
    upserts = []
    for mech in mechs:
        salt = os.urandom(24)
        upserts.append(
            ScramCredentialUpsertion(
                name, TYPE_OF[mech], iterations, salt, salted_password(mech, password, salt, iterations)
            )
        )
    # one request per mechanism: Kafka refuses a user named twice in one request (DUPLICATE_RESOURCE)
    failures = []
    for u in upserts:
        failures += _alter(bootstrap, timeout, AlterUserScramCredentialsRequest(deletions=[], upsertions=[u]))
    if failures:
        raise CommandError("; ".join(failures))
    if as_json:
        emit_json({"user": name, "mechanisms": mechs, "iterations": iterations})
    else:
        click.echo(f"Set the credentials of user {name}: {', '.join(mechs)} ({iterations} iterations).")


@users.command("list")
@connection_options
@click.argument("names", nargs=-1)
def list_users(bootstrap: str, timeout: float, as_json: bool, names: tuple[str, ...]) -> None:
    """The SCRAM users (all, or NAMES) with their mechanisms and iterations."""
    req = DescribeUserScramCredentialsRequest(users=[UserName(n) for n in names] if names else None)
    resp = _call(bootstrap, timeout, DESCRIBE, req)
    if resp.error_code:
        raise CommandError(_error(resp.error_code, resp.error_message, ",".join(names)))
    found, failures = [], []
    for r in sorted(resp.results, key=lambda r: r.user):
        if r.error_code:
            failures.append(_error(r.error_code, r.error_message, r.user))
            continue
        found.append(
            {
                "user": r.user,
                "credentials": [
                    {
                        "mechanism": MECHANISM_TYPES.get(c.mechanism, str(c.mechanism)),
                        "iterations": c.iterations,
                    }
                    for c in sorted(r.credential_infos, key=lambda c: c.mechanism)
                ],
            }
        )
    if as_json:
        emit_json(found)
    else:
        table(
            ["USER", "MECHANISM", "ITERATIONS"],
            [(u["user"], c["mechanism"], c["iterations"]) for u in found for c in u["credentials"]],
        )
    if failures:
        raise CommandError("; ".join(failures))


@users.command("delete")
@connection_options
@click.argument("names", nargs=-1, required=True)
@click.option(
    "--mechanism",
    "-m",
    "mechanisms",
    type=MECHANISMS,
    multiple=True,
    help="Delete only this mechanism's credential (repeatable; default: every one the user has).",
)
def delete(
    bootstrap: str, timeout: float, as_json: bool, names: tuple[str, ...], mechanisms: tuple[str, ...]
) -> None:
    """Delete the SCRAM credentials of users NAMES."""
    failures: list[str] = []
    deleted: list[dict] = []
    for name in dict.fromkeys(names):
        if mechanisms:
            mechs = [m.upper() for m in mechanisms]
        else:
            resp = _call(
                bootstrap, timeout, DESCRIBE, DescribeUserScramCredentialsRequest(users=[UserName(name)])
            )
            (r,) = resp.results
            if r.error_code:
                failures.append(_error(r.error_code, r.error_message, name))
                continue
            mechs = [
                MECHANISM_TYPES[c.mechanism] for c in r.credential_infos if c.mechanism in MECHANISM_TYPES
            ]
        errors = []
        for mech in mechs:
            req = AlterUserScramCredentialsRequest(
                deletions=[ScramCredentialDeletion(name, TYPE_OF[mech])], upsertions=[]
            )
            errors += _alter(bootstrap, timeout, req)
        failures += errors
        if not errors:
            deleted.append({"user": name, "mechanisms": mechs})
    if as_json:
        emit_json(deleted)
    else:
        for d in deleted:
            click.echo(f"Deleted user {d['user']} ({', '.join(d['mechanisms'])}).")
    if failures:
        raise CommandError("; ".join(failures))
