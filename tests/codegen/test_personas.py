"""broker/personas.py is what `python -m codegen personas` reads off the releases' kafka-clients jars
(fetched by scripts/setup.sh test into .reference); it fails, never skips, when they are missing."""

from __future__ import annotations

from codegen import personas


def test_checked_in_personas_match_the_released_jars():
    assert personas.generate(check=True) == []
