"""One SparkSession for the whole Spark stage, and the broker-written data directory it reads."""

from __future__ import annotations

import pytest

from tests.spark import fixture_log


@pytest.fixture(scope="session")
def spark():
    from broker.spark.session import local_session

    s = local_session(app="pykbroker-tests")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def history(tmp_path_factory) -> fixture_log.History:
    return fixture_log.build(tmp_path_factory.mktemp("spark") / "data")
