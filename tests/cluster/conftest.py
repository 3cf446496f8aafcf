"""Fixtures for tests on a real Spark standalone cluster (``tests/cluster/cluster.py``).

Tests marked ``cluster`` start JVMs, mount namespaces and a moto server: they run only when
asked, with ``--run-cluster`` (``make test-cluster``) or ``STREAMTABLE_CLUSTER_TESTS=1``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.cluster.cluster import (
    S3Server,
    SparkCluster,
    cluster_spark_session,
    s3_server,
    spark_cluster,
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-cluster", action="store_true", default=False,
                     help="run the tests marked 'cluster' (a real Spark standalone cluster)")


def cluster_tests_enabled(config: pytest.Config) -> bool:
    """Whether the ``cluster`` tests were asked for (option or environment)."""
    try:
        option = bool(config.getoption("--run-cluster"))
    except ValueError:  # this conftest was not loaded early enough to register the option
        option = False
    return option or os.environ.get("STREAMTABLE_CLUSTER_TESTS") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if cluster_tests_enabled(config):
        return
    skip = pytest.mark.skip(
        reason="cluster test: run with --run-cluster or STREAMTABLE_CLUSTER_TESTS=1")
    for item in items:
        if item.get_closest_marker("cluster") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A moto S3 server in its own process, with a fresh bucket."""
    with s3_server(log_dir=tmp_path_factory.mktemp("moto")) as server:
        yield server


def cluster_base_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where a cluster keeps its logs (``master.log``, ``worker-<i>.log``) and its node dir."""
    return tmp_path_factory.mktemp("spark-cluster")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """Master and two 1-core workers sharing no local disk, for a whole module."""
    with spark_cluster(workers=2, cores=1, base_dir=cluster_base_dir(tmp_path_factory)) as c:
        yield c
    assert not c.processes(), f"processes left behind: {c.processes()}"


@pytest.fixture(scope="module")
def cluster_spark(cluster: SparkCluster, s3: S3Server) -> Iterator[Any]:
    """streamtable's SparkSession on ``cluster``: one 1-core executor per worker, executors
    given ``s3``'s endpoint and credentials; it waited until both executors registered."""
    with cluster_spark_session(cluster, s3) as spark:
        yield spark
