"""``python -m codegen generate [--check]``."""

from __future__ import annotations

import sys

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
def personas_cmd(check: bool) -> None:
    """Regenerate broker/personas.py from the released kafka-clients jars in .reference."""
    drift = personas.generate(check=check)
    missing = [d for d in drift if d.startswith("missing")]
    for d in missing:
        click.echo(d, err=True)
    if missing:
        sys.exit(2)
    if check and drift:
        click.echo("broker/personas.py is out of date; run: python -m codegen personas", err=True)
        sys.exit(1)
    click.echo("wrote broker/personas.py" if drift else "broker/personas.py matches the releases")


if __name__ == "__main__":
    main()
