"""A Kafka wire-protocol broker in Python."""

__version__ = "0.1.0"
