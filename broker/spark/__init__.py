"""The data pipeline on Spark (the optional ``[spark]`` extra; the broker never imports this).

* :mod:`broker.spark.logdir` and :mod:`broker.spark.coordinator_log`: plain-Python readers of a data
  directory (records, committed offsets, group changes);
* :mod:`broker.spark.source`: the ``pykbroker`` data source over a data directory (batch and stream);
* :mod:`broker.spark.wire`: the ``kafka-wire`` data source over the Kafka protocol (any broker);
* :mod:`broker.spark.jobs`: reference jobs (lag, offset audit, rebalance timeline, Parquet export);
* :mod:`broker.spark.session`: a local SparkSession with both sources registered.
"""
