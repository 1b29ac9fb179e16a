"""Code generator: KRPC JSON schemas in ``schemas/`` -> Python codecs in ``broker/protocol/generated/``.

Run ``python -m codegen generate`` after editing a schema; ``--check`` fails when the checked-in
output differs from what the schemas produce (the test suite runs it).
"""
