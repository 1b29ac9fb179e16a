"""One SparkSession for the whole Spark stage (with Spark's Kafka connector on its classpath when
scripts/spark-kafka.sh has fetched it), and the broker-written data directory it reads."""

from __future__ import annotations

import os

import pytest

from tests.spark import fixture_log


def _connector_jars() -> tuple[list[str], str | None]:
    from broker.spark.session import ConnectorMissing, kafka_connector_jars

    try:
        return kafka_connector_jars(), None
    except ConnectorMissing as e:
        return [], str(e)


@pytest.fixture(scope="session")
def spark():
    from broker.spark.session import local_session

    jars, _why = _connector_jars()
    # the Kafka sink's cached producers outlive each test's broker: let them go soon after
    quiet = {
        "spark.kafka.producer.cache.timeout": "5s",
        "spark.kafka.producer.cache.evictorThreadRunInterval": "2s",
    }
    s = local_session(app="pykbroker-tests", kafka_jars=jars, **quiet)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def kafka_format(spark) -> str:
    """``"kafka"`` when the session has Spark's Kafka connector; skips the test otherwise (fails
    under CI, where scripts/setup.sh test has fetched it)."""
    jars, why = _connector_jars()
    if not jars:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return "kafka"


@pytest.fixture(scope="session")
def history(tmp_path_factory) -> fixture_log.History:
    return fixture_log.build(tmp_path_factory.mktemp("spark") / "data")
