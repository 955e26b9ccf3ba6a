"""One local SparkSession, shared by every test of the spark suite."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """``local[2]``, no UI, two shuffle partitions; Python workers run this interpreter."""
    from pyspark.sql import SparkSession

    with pytest.MonkeyPatch.context() as env:  # the JVM and its Python workers inherit these
        env.setenv("PYSPARK_PYTHON", sys.executable)
        env.setenv(
            "PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        )
        env.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        session = (
            SparkSession.builder.master("local[2]")
            .appName("xdn-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.adaptive.enabled", "false")  # tiny data: plain plans are faster
            .config("spark.default.parallelism", "2")
            .config("spark.driver.host", "127.0.0.1")
            # every audit of the suite runs in this one session: room for their broadcasts
            .config("spark.driver.memory", "2g")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
