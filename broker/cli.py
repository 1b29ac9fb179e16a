"""Command line: ``python -m broker serve`` (also installed as ``pykbroker``)."""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from broker.cli_admin import LazyCommand
from broker.cli_admin import register as register_admin_commands
from broker.config import Config, ConfigError, parse_pairs, parse_properties
from broker.datadir import DataDirLocked
from broker.log.segment import LogCorruption, note_starting_open_files_limit
from broker.personas import PERSONAS
from broker.runtime import configure_logging, remove_ready_file, tune_collector, write_ready_file
from broker.security.acl_store import AclStoreError
from broker.server.listener import ListenError


def _without_collector_until_listening(command: Callable[..., None]) -> Callable[..., None]:
    """``serve`` runs its start-up without the cyclic collector: start-up imports the broker
    (broker.app) and builds the loaded logs and groups, objects that live as long as the process,
    and a collection among them finds nothing. Once listening, :func:`_run` freezes them
    (``gc.freeze``) and turns the collector back on; it is back on too if ``serve`` returns or
    raises before that."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        gc.disable()
        try:
            command(*args, **kwargs)
        finally:
            gc.enable()

    return wrapper


@click.group()
@click.version_option(package_name="pykbroker", prog_name="pykbroker")
def main() -> None:
    """A Kafka wire-protocol broker for local development and client tests."""


@main.command()
@click.option("--host", default=None, help="Address to listen on [default: 127.0.0.1].")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Port to listen on [default: 9092; 0 = any free].",
)
@click.option("--advertised-host", default=None, help="Host name clients are told to connect to.")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help="[default: ./kafka-data]")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="info",
    show_default=True,
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"], case_sensitive=False),
    default="text",
    show_default=True,
    help="json: one JSON object per log line.",
)
@click.option(
    "--ready-file",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Write host:port of each listener here once listening (removed at shutdown).",
)
@click.option("--config", "pairs", multiple=True, metavar="KEY=VALUE", help="A Kafka property (repeatable).")
@click.option(
    "--config-file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="A .properties file with Kafka property names.",
)
@click.option(
    "--recover",
    is_flag=True,
    help="Truncate a damaged partition log at its first bad batch (dropping everything after it, "
    "reported in the log) instead of refusing to start.",
)
@click.option(
    "--control-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve the control API (fault rules, live state; HTTP/JSON) on this port [default: off].",
)
@click.option("--control-host", default=None, help="Address of the control API [default: 127.0.0.1].")
@click.option("--control-token", default=None, help="Bearer token the control API requires.")
@click.option(
    "--tls",
    type=click.Choice(["self-signed"]),
    default=None,
    help="Serve TLS with a local CA and server certificate kept in <data dir>/tls (created once); "
    "adds an SSL listener on port+1 unless the listeners have one, and prints the client settings.",
)
@click.option(
    "--nodes",
    type=click.IntRange(1, 64),
    default=None,
    help="Simulate a cluster of this many nodes in one process (config cluster.nodes), listening on "
    "port .. port+N-1 [default: 1].",
)
@click.option(
    "--kafka-version",
    type=click.Choice(sorted(PERSONAS)),
    default=None,
    help="Act as this Kafka release's broker: advertise and serve only its APIs and versions.",
)
@click.option(
    "--persona",
    type=click.Choice(["redpanda"]),
    default=None,
    help="Act as a Redpanda broker: its APIs and versions, cluster id and defaults (see README).",
)
@_without_collector_until_listening
def serve(
    host: str | None,
    port: int | None,
    advertised_host: str | None,
    data_dir: str | None,
    log_level: str,
    log_format: str,
    ready_file: str | None,
    pairs: tuple[str, ...],
    config_file: str | None,
    recover: bool,
    control_port: int | None,
    control_host: str | None,
    control_token: str | None,
    kafka_version: str | None,
    persona: str | None,
    tls: str | None,
    nodes: int | None,
) -> None:
    """Run the broker until SIGTERM or Ctrl-C (graceful: in-flight requests are answered and the
    logs fsynced; a second signal exits at once)."""
    configure_logging(log_level, log_format.lower(), sys.stderr)
    try:
        values: dict[str, str] = {}
        if config_file:
            values.update(parse_properties(Path(config_file).read_text()))
        values.update(parse_pairs(pairs))
        # the command line wins over the file: --host/--port replace its listeners (all of them),
        # --advertised-host its advertised.listeners
        if (host is not None or port is not None) and values.pop("listeners", None):
            click.echo("note: --host/--port replace the listeners of the configuration", err=True)
        if advertised_host is not None and values.pop("advertised.listeners", None):
            click.echo("note: --advertised-host replaces advertised.listeners of the configuration", err=True)
        for key, val in (
            ("host", host),
            ("port", port),
            ("advertised.host", advertised_host),
            ("control.port", control_port),
            ("control.host", control_host),
            ("control.token", control_token),
            ("kafka.version", kafka_version),
            ("persona", persona),
            ("cluster.nodes", nodes),
        ):
            if val is not None:
                values[key] = str(val)
        if data_dir is not None:
            values["log.dirs"] = data_dir
        config = Config(values)
        if tls == "self-signed":
            config = _self_signed(config, values)
    except ConfigError as e:
        raise click.UsageError(str(e)) from e
    from broker.server import new_event_loop

    _raise_fd_limit()
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(_run(config, recover, Path(ready_file) if ready_file else None))
    except ConfigError as e:  # e.g. a TLS listener whose key file cannot be read
        raise click.UsageError(str(e)) from e
    except (ListenError, DataDirLocked, AclStoreError) as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    except LogCorruption as e:
        click.echo(
            f"error: {e}\nThe log is damaged where a crash cannot have torn it. Start with --recover to "
            f"truncate {e.path.name} at byte {e.position} (offset {e.offset} on) and drop the rest of "
            "that partition after it.",
            err=True,
        )
        sys.exit(1)
    except OSError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    finally:
        loop.close()
    # Stopped cleanly (every log closed and synced, the clean-shutdown marker written): exit
    # without the interpreter's teardown, which frees every object start-up built one by one --
    # with 10,000 partitions ~1.5 s, longer than the rest of the stop.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _self_signed(config: Config, values: dict[str, str]) -> Config:
    """``--tls self-signed``: the CA and server certificate of broker.security.selfsigned as the
    TLS listeners' key store; an SSL listener is added (port+1) when none is configured."""
    from broker.security.selfsigned import ensure_self_signed

    if any(k.startswith("ssl.keystore.") and k != "ssl.keystore.type" for k in values):
        raise ConfigError("--tls self-signed makes its own key store: drop the ssl.keystore.* settings")
    endpoints = config.endpoints()
    if not any(ep.tls for ep in endpoints):
        if "listeners" in config.explicit and config["listeners"].strip():
            raise ConfigError("--tls self-signed: the listeners have no SSL or SASL_SSL listener; add one")
        host, port = config["host"], config["port"]
        ssl_port = port + 1 if port else 0
        where = f"[{host}]" if ":" in host else host
        values["listeners"] = f"PLAINTEXT://{where}:{port},SSL://{where}:{ssl_port}"
        if config["advertised.host"] or config["advertised.port"]:
            adv = config["advertised.host"] or host
            values["advertised.listeners"] = (
                f"PLAINTEXT://{adv}:{config['advertised.port'] or port},SSL://{adv}:{ssl_port}"
            )
        values.pop("host", None)
        values.pop("port", None)
        config = Config(values)
    hosts = [h for ep in config.endpoints() for h in (ep.host, ep.advertised_host)]
    ca, server = ensure_self_signed(config.data_dir, hosts)
    values["ssl.keystore.location"] = str(server)
    values["ssl.keystore.type"] = "PEM"
    config = Config(values)
    config.self_signed_ca = ca  # type: ignore[attr-defined]  # printed once the listeners are bound
    return config


def _print_tls_settings(broker: object, ca: object) -> None:
    for b in broker.listener.bound:  # type: ignore[attr-defined]
        ep = b.endpoint
        if not ep.tls:
            continue
        host, port = broker.advertised[ep.name]  # type: ignore[attr-defined]
        click.echo(
            f"TLS listener {ep.name} (self-signed): client settings\n"
            f"  bootstrap.servers={host}:{port}\n"
            f"  security.protocol={ep.security_protocol}\n"
            f"  ssl.ca.location={ca}                  # librdkafka; kafka-python/aiokafka: ssl_cafile\n"
            f"  ssl.truststore.type=PEM\n"
            f"  ssl.truststore.location={ca}          # Java",
            err=True,
        )


def _raise_fd_limit() -> None:
    """Every connection is a file descriptor: lift the soft RLIMIT_NOFILE (often 1024) to the hard
    limit, so that thousands of clients (max.connections) are possible. The limit it started with
    is noted first: log.max.open.files (0) is half of that one, so segment files stay bounded."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # the segment files' budget (log.max.open.files) is half of the limit the user started us with,
    # whatever is raised here: raising is for connections, not for holding every partition's file
    note_starting_open_files_limit(soft)
    target = 1 << 20 if hard == resource.RLIM_INFINITY else min(hard, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as e:
            logging.getLogger("broker").warning("cannot raise the open-files limit from %d: %s", soft, e)


async def _run(config: Config, recover: bool = False, ready_file: Path | None = None) -> None:
    from broker.app import Broker

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # a signal during start-up stops right after it
        loop.add_signal_handler(sig, _on_signal, stop, sig)
    broker = Broker(config, recover=recover)  # binds, locks and loads, or raises having released all
    try:
        await broker.start()
    except BaseException:
        broker.close()
        raise
    # What start-up built (modules, classes, the loaded logs and groups) lives as long as the process:
    # frozen out of the collector's generations, and requests in flight die young (broker.runtime).
    # The collector, off during start-up (_without_collector_until_listening), runs from here on.
    tune_collector()
    gc.enable()
    ca = getattr(config, "self_signed_ca", None)
    if ca is not None:
        _print_tls_settings(broker, ca)
    if ready_file is not None:
        write_ready_file(ready_file, broker.addresses())
    try:
        await stop.wait()
        logging.getLogger("broker").info("shutting down (a second SIGTERM or Ctrl-C exits at once)")
        await broker.stop()
    finally:
        if ready_file is not None:
            remove_ready_file(ready_file)


def _on_signal(stop: asyncio.Event, sig: signal.Signals) -> None:
    """The first SIGTERM/SIGINT starts a graceful shutdown; a second one exits at once, without
    waiting for requests in flight or flushing (like a kill: unflushed data may be lost)."""
    if not stop.is_set():
        stop.set()
        return
    logging.getLogger("broker").warning("second %s: exiting at once", sig.name)
    logging.shutdown()
    os._exit(128 + sig)


class _LazySpark(click.Group):
    """The ``spark`` command group, imported only when used (the broker never imports pyspark)."""

    def _real(self) -> click.Group:
        from broker.spark.cli import spark

        return spark

    def list_commands(self, ctx: click.Context) -> list[str]:
        return self._real().list_commands(ctx)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return self._real().get_command(ctx, name)


main.add_command(
    _LazySpark(
        "spark",
        help="Analyse a data directory with Spark (needs the [spark] extra): lag, audit, timeline, export.",
    )
)

# imported only when run (pykbroker serve does not pay for the control package)
main.add_command(
    LazyCommand(
        "ctl",
        "broker.control.cli:ctl",
        "A running broker's control API: fault rules, clock, trace journal, invariants, live state.",
    )
)
main.add_command(
    LazyCommand("trace", "broker.control.trace:trace_command", "Print a trace journal, group by group.")
)
register_admin_commands(main)


if __name__ == "__main__":
    main()
