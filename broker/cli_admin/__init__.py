"""The admin command line: ``pykbroker topics|groups|produce|consume|cluster`` (issue 17), and the
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

import click

from broker.cli_admin.cluster import cluster
from broker.cli_admin.data import consume, produce
from broker.cli_admin.groups import groups
from broker.cli_admin.topics import topics
from broker.dump.cli import dump

COMMANDS: tuple[click.Command, ...] = (topics, groups, produce, consume, cluster, dump)


def register(main: click.Group) -> None:
    """Add the admin commands to the ``pykbroker`` group."""
    for command in COMMANDS:
        main.add_command(command)
