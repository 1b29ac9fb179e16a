"""What every admin command shares: the connection options, error handling, output."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click
import orjson

EXIT_OK = 0
EXIT_KAFKA_ERROR = 1
EXIT_UNREACHABLE = 3

DEFAULT_BOOTSTRAP = "localhost:9092"
BOOTSTRAP_ENV = "PYKBROKER_BOOTSTRAP_SERVER"


class CommandError(click.ClickException):
    """A failure to report in one line with an exit code (1: the broker said no, 3: unreachable)."""

    def __init__(self, message: str, exit_code: int = EXIT_KAFKA_ERROR):
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def translate(e: BaseException) -> CommandError | None:
    """A kafka-python exception as a one-line :class:`CommandError` (``None``: not a Kafka error)."""
    from kafka import errors as Errors

    if isinstance(e, Errors.BrokerResponseError):
        name = getattr(e, "message", "") or type(e).__name__
        detail = one_line(e.args[0]) if e.args and e.args[0] else ""
        return CommandError(f"{name}: {detail}" if detail else name)
    if isinstance(e, Errors.KafkaConnectionError):
        return CommandError(f"cannot reach the cluster: {one_line(e) or type(e).__name__}", EXIT_UNREACHABLE)
    if isinstance(e, Errors.KafkaTimeoutError | TimeoutError):
        what = one_line(e) or type(e).__name__
        if "bootstrap" in what.lower():
            return CommandError(f"cannot reach the bootstrap server: {what}", EXIT_UNREACHABLE)
        return CommandError(f"timed out: {what}", EXIT_UNREACHABLE)
    if isinstance(e, Errors.KafkaError):
        return CommandError(f"{type(e).__name__}: {one_line(e)}")
    return None


class AdminCommand(click.Command):
    """A command whose Kafka errors become one line on stderr and a documented exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.Exit:
            raise
        except (click.ClickException, click.Abort):
            raise
        except Exception as e:
            err = translate(e)
            if err is None:
                raise
            raise err from e


class AdminGroup(click.Group):
    command_class = AdminCommand


def connection_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--bootstrap-server``, ``--timeout``, ``--json`` and ``--verbose`` for a command."""

    @click.option(
        "--bootstrap-server",
        "-b",
        "bootstrap",
        envvar=BOOTSTRAP_ENV,
        default=DEFAULT_BOOTSTRAP,
        show_default=True,
        help=f"host:port[,host:port...] of the cluster (env {BOOTSTRAP_ENV}).",
    )
    @click.option(
        "--timeout",
        type=click.FloatRange(0.1),
        default=10.0,
        show_default=True,
        help="Request timeout, seconds.",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts) instead of a table.")
    @click.option("--verbose", "-v", is_flag=True, help="Show the client library's log.")
    @functools.wraps(fn)
    def wrapper(*args: Any, verbose: bool, **kwargs: Any) -> Any:
        logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
        logging.getLogger("kafka").setLevel(logging.INFO if verbose else logging.CRITICAL + 1)
        return fn(*args, **kwargs)

    return wrapper


def client_settings(bootstrap: str, timeout: float) -> dict[str, Any]:
    """kafka-python settings shared by the admin client, producer and consumer."""
    return {
        "bootstrap_servers": bootstrap.split(","),
        "client_id": "pykbroker-cli",
        "request_timeout_ms": int(timeout * 1000),
        "bootstrap_timeout_ms": int(timeout * 1000),
    }


def admin_client(bootstrap: str, timeout: float) -> Any:
    from kafka import KafkaAdminClient

    return KafkaAdminClient(**client_settings(bootstrap, timeout))


def emit_json(value: Any) -> None:
    click.echo(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS).decode())


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print rows under headers, columns left-aligned and padded (``-`` for None)."""
    cells = [[("-" if c is None else str(c)) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    for row in [list(headers), *cells]:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def parse_pairs(pairs: Iterable[str], what: str = "KEY=VALUE") -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected {what}, got {pair!r}")
        out[key.strip()] = value.strip()
    return out
