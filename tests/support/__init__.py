"""Helpers shared by the test modules (no fixtures here; fixtures go in tests/conftest.py)."""
