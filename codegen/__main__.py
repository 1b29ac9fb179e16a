"""``python -m codegen generate [--check]``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import personas
from .generate import generate
from .spec import SchemaError


@click.group()
def main() -> None:
    """Generate the protocol codecs from schemas/."""


@main.command("generate")
@click.option("--check", is_flag=True, help="Fail if the checked-in output differs; write nothing.")
def generate_cmd(check: bool) -> None:
    """Regenerate broker/protocol/generated/ from schemas/."""
    try:
        drift = generate(check=check)
    except SchemaError as e:
        click.echo(f"schema error: {e}", err=True)
        sys.exit(2)
    if check:
        if drift:
            click.echo("generated code is out of date with schemas/:", err=True)
            for d in drift:
                click.echo(f"  {d}", err=True)
            click.echo("run: python -m codegen generate", err=True)
            sys.exit(1)
        click.echo("generated code matches schemas/")
    else:
        click.echo(f"wrote {len(drift)} file(s)" if drift else "nothing to do")


@main.command("personas")
@click.option("--check", is_flag=True, help="Fail if broker/personas.py differs; write nothing.")
@click.option(
    "--redpanda",
    "redpanda",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="A git clone of redpanda-data/redpanda: also (re)generate broker/personas_redpanda.py from "
    f"its {personas.REDPANDA_RELEASE} sources (without it that table is left as it is).",
)
def personas_cmd(check: bool, redpanda: str | None) -> None:
    """Regenerate broker/personas.py from the released kafka-clients jars in .reference."""
    drift = personas.generate(check=check)
    missing = [d for d in drift if d.startswith("missing")]
    for d in missing:
        click.echo(d, err=True)
    if missing:
        sys.exit(2)
    if redpanda is not None:
        drift += personas.generate_redpanda(Path(redpanda), check=check)
    if check and drift:
        click.echo(f"{', '.join(drift)} out of date; run: python -m codegen personas", err=True)
        sys.exit(1)
    click.echo(f"wrote {', '.join(drift)}" if drift else "the persona tables match their sources")


if __name__ == "__main__":
    main()
