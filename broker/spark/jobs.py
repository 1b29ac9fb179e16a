"""Reference jobs, each writing Parquet (and a PNG chart) under an output directory. Each reads a
:class:`~broker.spark.inputs.Source`: a broker's data directory (offline, the ``pykbroker`` source;
a plain path means that) or a live Kafka-compatible broker (Spark's own Kafka connector); both give
the records with the columns of Spark's Kafka source and the same views of the coordinator log.

* :func:`lag` -- consumer-lag history per group and partition: at each commit, the partition's log
  end offset at that moment minus the committed offset. The log end offset at time T is one past
  the highest offset whose record timestamp is at most T (exact for LogAppendTime topics; with
  CreateTime it trusts the producers' clocks).
* :func:`audit` -- commits that went ``backwards``; ``unowned`` commits: for a partition that no
  member of the generation (or group epoch) in effect owned, made by a fenced member or by a client
  outside the group (the broker validates generations and epochs, so a commit from a stale one never
  reaches the log; what can reach it is a commit the assignment does not explain); commits past the
  log end at that moment (``ahead_of_log``); and commits below the log start (records deleted
  before they were consumed: ``gap``).
* :func:`timeline` -- per group and generation: members, partition ownership (``owners``: member
  and partition pairs), when it happened and how long the rebalance took; and a summary with the
  rebalance count and total time rebalancing (a generation with no members, the group emptying, is
  not a rebalance). An empty generation 0 (Kafka writes one when a JoinGroup creates the group) is
  left out. The chart shows partition ownership over time, one panel per group (charts.py).
  For KIP-848 groups the time is from the group epoch bump to the last member reaching that epoch;
  for classic groups it is from the first JoinGroup of the rebalance (the broker's rebalance journal,
  group-rebalances.jsonl in a data directory) to the record of the assignment; over the wire, where
  Kafka keeps no such record, from the end of the join phase (the state change time the group
  record carries): a lower bound.
* :func:`export` -- incremental export of topics to Parquet: readStream -> writeStream with
  Trigger.AvailableNow and a checkpoint, so each run appends exactly the records added since.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from . import charts, inputs, logdir
from .inputs import Source

Input = str | Path | Source


def lag_table(spark: SparkSession, source: Input) -> DataFrame:
    src = inputs.as_source(source)
    commits = inputs.coordinator_view(spark, src, "offsets").where(~F.col("deleted"))
    commits = commits.where(F.col("topic") != logdir.OFFSETS_TOPIC)
    topics = [r.topic for r in commits.select("topic").distinct().collect()]
    if not topics:
        schema = (
            "group string, topic string, partition int, commit_timestamp timestamp, offset long, "
            "log_offset long, log_end_offset long, lag long"
        )
        return spark.createDataFrame([], schema)
    known = inputs.topics(src)
    recs = inputs.records(spark, src, sorted(t for t in topics if t in known))
    recs = recs.select("topic", "partition", "offset", "timestamp")
    c, r = commits.alias("c"), recs.alias("r")
    joined = c.join(
        r,
        (F.col("c.topic") == F.col("r.topic"))
        & (F.col("c.partition") == F.col("r.partition"))
        & (F.col("r.timestamp") <= F.col("c.commit_timestamp")),
        "left",
    )
    return (
        joined.groupBy("c.group", "c.topic", "c.partition", "c.commit_timestamp", "c.offset", "c.log_offset")
        .agg(F.coalesce(F.max("r.offset") + 1, F.lit(0)).alias("log_end_offset"))
        .withColumn("lag", F.greatest(F.col("log_end_offset") - F.col("offset"), F.lit(0)))
        .orderBy("group", "topic", "partition", "log_offset")
    )


def lag(spark: SparkSession, source: Input, out: str) -> DataFrame:
    df = lag_table(spark, source)
    df.write.mode("overwrite").parquet(str(Path(out) / "lag.parquet"))
    charts.lag_panels(Path(out) / "lag.png", [r.asDict() for r in df.collect()])
    return df


def audit_table(spark: SparkSession, source: Input) -> DataFrame:
    src = inputs.as_source(source)
    commits = inputs.coordinator_view(spark, src, "offsets").where(~F.col("deleted"))
    w = Window.partitionBy("group", "topic", "partition").orderBy("log_offset")
    lags = lag_table(spark, src).select("group", "topic", "partition", "log_offset", "log_end_offset")
    starts = inputs.log_starts(spark, src)
    df = (
        commits.withColumn("previous_offset", F.lag("offset").over(w))
        .join(lags, ["group", "topic", "partition", "log_offset"], "left")
        .join(starts, ["topic", "partition"], "left")
    )
    findings = [
        ("backwards", F.col("offset") < F.col("previous_offset"), "offset went back from previous_offset"),
        ("unowned", ~F.col("owned"), "no member of the generation in effect owned the partition"),
        ("ahead_of_log", F.col("offset") > F.col("log_end_offset"), "commit past the log end at that time"),
        ("gap", F.col("offset") < F.col("log_start_offset"), "records below the log start were never read"),
    ]
    parts = [
        df.where(cond).select(
            "group", "topic", "partition", "log_offset", "commit_timestamp", "offset", "previous_offset",
            "generation", F.lit(kind).alias("finding"), F.lit(why).alias("detail"),
        )
        for kind, cond, why in findings
    ]  # fmt: skip
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out.orderBy("group", "log_offset", "finding")


def audit(spark: SparkSession, source: Input, out: str) -> DataFrame:
    df = audit_table(spark, source)
    df.write.mode("overwrite").parquet(str(Path(out) / "audit.parquet"))
    counts = {
        (r["group"], r["finding"]): r["count"] for r in df.groupBy("group", "finding").count().collect()
    }
    charts.findings(Path(out) / "audit.png", counts)
    return df


def timeline_tables(spark: SparkSession, source: Input) -> tuple[DataFrame, DataFrame]:
    """(per group and generation: time, members, owners; per group: rebalances and time spent)."""
    src = inputs.as_source(source)
    ev = inputs.coordinator_view(spark, src, "groups")
    # Kafka records a classic group created by a JoinGroup that returns MEMBER_ID_REQUIRED as an
    # empty generation 0; nobody was ever a member of it, so it is no rebalance
    kept = (F.col("protocol") == "classic") & F.col("event").isin("join", "stay", "empty", "deleted")
    kept &= ~((F.col("generation") == 0) & (F.col("event") == "empty"))
    classic = (
        ev.where(kept)
        .groupBy("group", "protocol", "generation")
        .agg(
            F.min("timestamp").alias("settled"),
            F.coalesce(F.min("state_timestamp"), F.min("timestamp")).alias("timestamp"),
            F.max("members").alias("members"),
            F.sort_array(F.collect_set("member_id")).alias("member_ids"),
            F.flatten(
                F.collect_list(F.transform("assignment", lambda a: F.concat_ws("-", a.topic, a.partition.cast("string")).alias("x")))
            ).alias("partitions"),
            F.sum(F.when(F.col("event") == "join", 1).otherwise(0)).alias("joined"),
            _owners(),
        )
    )  # fmt: skip
    # the join phase's start, from the broker's rebalance journal (a data directory's): the group
    # record only carries the end of the join phase
    starts = inputs.rebalance_starts(spark, src)
    classic = (
        classic.join(starts, ["group", "generation"], "left")
        .withColumn("timestamp", F.least("timestamp", F.coalesce("join_started", "timestamp")))
        .drop("join_started")
    )
    consumer_epochs = ev.where((F.col("protocol") == "consumer") & (F.col("event") == "epoch")).select(
        "group", "protocol", "generation", F.col("timestamp"), "members"
    )
    consumer_done = (
        ev.where((F.col("protocol") == "consumer") & (F.col("event") == "assignment"))
        .groupBy("group", F.col("member_epoch").alias("generation"))
        .agg(
            F.max("timestamp").alias("settled"),
            F.sort_array(F.collect_set("member_id")).alias("member_ids"),
            F.flatten(F.collect_list(F.transform("assignment", lambda a: F.concat_ws("-", a.topic, a.partition.cast("string"))))).alias("partitions"),
            _owners(),
        )
    )  # fmt: skip
    consumer = consumer_epochs.join(consumer_done, ["group", "generation"], "left").withColumn(
        "joined", F.lit(None).cast("long")
    )
    gens = classic.unionByName(consumer, allowMissingColumns=True).withColumn(
        "rebalance_ms",
        (F.col("settled").cast("double") - F.col("timestamp").cast("double")) * 1000,
    )
    gens = gens.select(
        "group",
        "protocol",
        "generation",
        "timestamp",
        "settled",
        "rebalance_ms",
        "members",
        "member_ids",
        "partitions",
        "owners",
    ).orderBy("group", "generation")
    # a generation nobody is in (the last member left: the group is Empty) is no rebalance
    rebalanced = F.col("members") > 0
    summary = gens.groupBy("group", "protocol").agg(
        F.sum(F.when(rebalanced, 1).otherwise(0)).alias("rebalances"),
        F.sum(F.when(rebalanced, F.coalesce("rebalance_ms", F.lit(0.0))).otherwise(0.0)).alias(
            "rebalancing_ms"
        ),
        F.max("members").alias("max_members"),
        F.min("timestamp").alias("first"),
        F.max("timestamp").alias("last"),
    )
    return gens, summary.orderBy("group")


def timeline(spark: SparkSession, source: Input, out: str) -> tuple[DataFrame, DataFrame]:
    gens, summary = timeline_tables(spark, source)
    gens.write.mode("overwrite").parquet(str(Path(out) / "timeline.parquet"))
    summary.write.mode("overwrite").parquet(str(Path(out) / "rebalances.parquet"))
    rows = [r.asDict(recursive=True) for r in gens.collect()]
    for r in rows:
        r["owners"] = [(o["member"], o["partition"]) for o in r["owners"] or []]
    charts.ownership(Path(out) / "timeline.png", rows)
    return gens, summary


def export(
    spark: SparkSession, source: Input, out: str, topics: str | None = None, checkpoint: str | None = None
) -> int:
    """Append the records added since the last run to ``out``/records (Parquet, partitioned by
    topic); returns how many were written in this run. A checkpoint belongs to one kind of source:
    the pykbroker source and the connector keep their offsets differently."""
    target = Path(out) / "records"
    ckpt = checkpoint or str(Path(out) / "_checkpoint")
    q = (
        inputs.records_stream(spark, inputs.as_source(source), topics)
        .writeStream.format("parquet")
        .option("path", str(target))
        .option("checkpointLocation", ckpt)
        .partitionBy("topic")
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    if q.exception() is not None:
        raise q.exception()
    return sum(int(p.get("numInputRows", 0)) for p in q.recentProgress)


def _owners() -> Column:
    """Per generation: (member, "topic-partition") for every partition a member was assigned."""
    return F.flatten(
        F.collect_list(
            F.transform(
                "assignment",
                lambda a: F.struct(
                    F.col("member_id").alias("member"),
                    F.concat_ws("-", a.topic, a.partition.cast("string")).alias("partition"),
                ),
            )
        )
    ).alias("owners")
