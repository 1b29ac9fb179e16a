"""The admin command line: ``pykbroker topics|groups|produce|consume|cluster|users`` (issue 17), and the
offline ``pykbroker dump`` (broker/dump).

The commands speak the Kafka protocol to ``--bootstrap-server`` through kafka-python (a pure-Python
client, imported only when one of these commands runs), so they work against Apache Kafka as well
as against pykbroker. Output is a table for people, or JSON with ``--json``.

Exit codes (scripts may rely on them):

* 0: done;
* 1: the broker answered with an error (unknown topic, topic exists, group not empty, ...);
* 2: bad usage (click's own code);
* 3: the bootstrap server cannot be reached, or a request timed out.

Errors are printed on one line on stderr: ``error: <what>``.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

#: name -> (module:attribute, one-line help); imported only when the command runs or shows its help,
#: so that ``pykbroker serve`` does not pay for them (about 18 ms of click declarations)
COMMANDS: dict[str, tuple[str, str]] = {
    "topics": (
        "broker.cli_admin.topics:topics",
        "List, describe, create, delete topics; change their configs.",
    ),
    "groups": ("broker.cli_admin.groups:groups", "List, describe, delete groups; lag; reset offsets."),
    "produce": ("broker.cli_admin.data:produce", "Produce one record per line of stdin."),
    "consume": ("broker.cli_admin.data:consume", "Print records of topics (group or assigned partitions)."),
    "cluster": ("broker.cli_admin.cluster:cluster", "The cluster: id, controller, brokers."),
    "users": ("broker.cli_admin.users:users", "SCRAM users: add (or change a password), list, delete."),
    "dump": ("broker.dump.cli:dump", "Read a data directory offline: segments, indexes, coordinator log."),
}


class LazyCommand(click.Command):
    """A command whose real definition is imported when it is invoked (click builds the real
    command's context, so its options, subcommands and help are the real ones)."""

    def __init__(self, name: str, target: str, short_help: str):
        super().__init__(name, short_help=short_help, help=short_help, add_help_option=False)
        self.target = target

    def real(self) -> click.Command:
        module, attr = self.target.split(":")
        return getattr(importlib.import_module(module), attr)

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        return self.real().make_context(info_name, args, parent=parent, **extra)


def register(main: click.Group) -> None:
    """Add the admin commands (and ``dump``) to the ``pykbroker`` group."""
    for name, (target, short_help) in COMMANDS.items():
        main.add_command(LazyCommand(name, target, short_help))
