"""The data pipeline on Spark (the optional ``[spark]`` extra; the broker never imports this).

* :mod:`broker.spark.logdir` and :mod:`broker.spark.coordinator_log`: plain-Python readers of a data
  directory (records, committed offsets, group changes);
* :mod:`broker.spark.source`: the ``pykbroker`` data source over a data directory (batch and stream);
* :mod:`broker.spark.jobs`: reference jobs (lag, offset audit, rebalance timeline, Parquet export)
  over a data directory or, through Spark's own Kafka connector, over any Kafka-compatible broker;
* :mod:`broker.spark.session`: a local SparkSession with the source registered and the connector's
  jars on its classpath.
"""
