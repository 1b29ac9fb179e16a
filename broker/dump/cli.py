"""``pykbroker dump PATH``: a data directory (or one partition directory) read offline."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import click
import orjson


def _ts(ms: int) -> str:
    if ms < 0:
        return str(ms)
    return (
        dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def _short(v: Any) -> str:
    text = repr(v) if not isinstance(v, dict) else orjson.dumps(v).decode()
    return text if len(text) <= 120 else text[:117] + "..."


def _print_partition(p: dict[str, Any], records: bool) -> None:
    click.echo(f"== {p['partition']} ==")
    for seg in p["segments"]:
        click.echo(seg["file"])
        for b in seg["batches"]:
            if "error" in b:
                click.echo(f"  @{b['position']}: {b['error']}")
                continue
            flags = [b["compression"], b["timestamp_type"]]
            flags += ["transactional"] * b["transactional"] + ["control"] * b["control"]
            click.echo(
                f"  batch offsets {b['base_offset']}-{b['last_offset']} @{b['position']} size {b['size']} "
                f"crc {'ok' if b['crc_ok'] else 'BAD'} {' '.join(flags)} producer {b['producer_id']}/"
                f"{b['producer_epoch']} seq {b['base_sequence']} records {len(b['records'])}"
            )
            if not records:
                continue
            for r in b["records"]:
                head = f"    {r['offset']} {_ts(r['timestamp'])}"
                if "control" in r:
                    click.echo(f"{head} control {r['control']}")
                elif "coordinator" in r:
                    c = r["coordinator"]
                    value = "tombstone" if c["value"] is None else _short(c["value"])
                    click.echo(f"{head} {c['type']} {_short(c['key'])} {value}")
                else:
                    hdrs = f" headers {_short(r['headers'])}" if r["headers"] else ""
                    click.echo(f"{head} key {_short(r['key'])} value {_short(r['value'])}{hdrs}")
        if "index" in seg:
            ix = seg["index"]
            entries = " ".join(f"{e['offset']}@{e['position']}" for e in ix["entries"])
            click.echo(
                f"  index: log size {ix['log_size']}, next offset {ix['next_offset']}, "
                f"max timestamp {ix['max_timestamp']}; entries {entries}"
            )
    for name, value in p.items():
        if name.endswith(".json"):
            click.echo(f"  {name}: {_short(value)}")


@click.command()
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help='One JSON document (bytes: text, or {"hex": ...}).')
@click.option(
    "--partition", "-p", "partitions", multiple=True, help="Only these partition directories (topic-N)."
)
@click.option("--no-records", is_flag=True, help="Batches only.")
def dump(path: Path, as_json: bool, partitions: tuple[str, ...], no_records: bool) -> None:
    """Read a data directory offline (no broker needed; safe beside a running one): segments
    (batches, records, headers, control records), indexes, checkpoints, and the coordinator's
    log (__consumer_offsets) decoded into group and offset records."""
    from broker.dump.reader import dump_data_dir, dump_partition, plain

    if any(path.glob("*.log")):
        data: dict[str, Any] = {"path": str(path), "files": {}, "partitions": [dump_partition(path)]}
    else:
        data = dump_data_dir(path)
    if partitions:
        data["partitions"] = [p for p in data["partitions"] if p["partition"] in partitions]
    if as_json:
        click.echo(orjson.dumps(plain(data), option=orjson.OPT_NON_STR_KEYS).decode())
        return
    for name, lines in data["files"].items():
        if isinstance(lines, list):
            click.echo(f"{name}: " + "; ".join(line for line in lines if not line.startswith("#")))
    for p in data["partitions"]:
        _print_partition(plain(p), records=not no_records)
