"""``pykbroker dump PATH``: read a data directory offline (broker/dump/formats.py declares its
on-disk formats with construct, independently of the broker's own decoders)."""
