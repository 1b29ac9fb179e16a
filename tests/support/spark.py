"""Spark helpers shared by the Spark tests (imported only by tests that have a Spark session)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def available_now(reader: Any, sink: Path, ckpt: Path, **options: str) -> list[int]:
    """Run the streaming ``reader`` (a DataStreamReader, ``options`` added) once with
    ``Trigger.AvailableNow`` into a Parquet ``sink`` with checkpoint ``ckpt``; returns the input rows
    of each micro-batch."""
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(sink))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(180), "hang guard: the AvailableNow query did not finish"
    assert q.exception() is None
    return [int(p["numInputRows"]) for p in q.recentProgress]
