"""Log tests: record batches and the record codec."""
