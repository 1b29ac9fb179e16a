"""Wire-protocol codec tests."""
