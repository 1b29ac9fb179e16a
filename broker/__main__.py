"""``python -m broker``: the command line of :mod:`broker.cli`.

Start-up: the collector is off while the command line's modules are imported. Importing them builds
a few hundred thousand objects (modules, classes, functions, tables) and no garbage, so every
collection the allocations would trigger walks them for nothing (~4% of the instructions of ``serve``
up to its first answer). ``serve`` keeps it off until the broker listens, then freezes what start-up
built and turns it back on (broker.cli.serve)."""

import gc

gc.disable()
from broker.cli import main  # noqa: E402

gc.enable()
main()
