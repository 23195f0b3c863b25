"""PostgreSQL dies or restarts under three firing `tidings serve` nodes: the nodes keep
running, reconnect when it is back, and every schedule fires exactly once into its queue.

Each test runs its own private PostgreSQL cluster (tests/integration/pg_cluster.py), so
killing it disturbs no other test: these run beside the rest of the suite.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pg_cluster import PrivateCluster, pg_bin, private_cluster
from test_multinode import Nodes, make_schedules, queue_bodies, wait_all_fired, wait_until_queued

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(pg_bin() is None, reason="needs the PostgreSQL server binaries"),
]


@pytest.fixture
def cluster() -> Iterator[PrivateCluster]:
    with private_cluster() as c:
        yield c


@pytest.fixture
def nodes(cluster: PrivateCluster, tmp_path: Path) -> Iterator[Nodes]:
    n = Nodes(cluster.url, tmp_path)
    yield n
    n.stop()


def _all_alive(nodes: Nodes) -> None:
    for i, (proc, _) in enumerate(nodes.procs):
        assert proc.poll() is None, (
            f"node {i} died: {(nodes.tmp_path / f'node-{i}.log').read_text()[-2000:]}")


def test_postgres_killed_mid_run_three_nodes_recover_without_loss_or_duplicates(
    nodes: Nodes, cluster: PrivateCluster
) -> None:
    n = 30_000
    nodes.start(3)
    nodes.wait_ready()
    make_schedules(cluster.url, n, spread_s=20)
    wait_until_queued(cluster.url, n // 5)
    cluster.kill()
    time.sleep(3)  # the nodes run on without a database for a while
    _all_alive(nodes)
    for _, port in nodes.procs:  # alive, and saying they cannot work
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200
        ready = httpx.get(f"http://127.0.0.1:{port}/health/ready", timeout=10)
        assert ready.status_code == 503, ready.text
        checks = ready.json()["checks"]
        assert not checks["database"]["ok"] and checks["database"]["reason"], checks
    cluster.start()  # crash recovery from the WAL
    wait_all_fired(cluster.url, n, timeout=240)
    _all_alive(nodes)
    for _, port in nodes.procs:  # ready again by themselves
        deadline = time.monotonic() + 30
        while (ready := httpx.get(f"http://127.0.0.1:{port}/health/ready",
                                  timeout=10)).status_code != 200:
            assert time.monotonic() < deadline, ready.text
            time.sleep(0.2)
    nodes.stop()  # once they are gone, nothing more can land: count now
    bodies = queue_bodies(cluster.url)
    assert len(bodies) == n and len(set(bodies)) == n


def test_postgres_restart_mid_run_nodes_recover_without_loss_or_duplicates(
    nodes: Nodes, cluster: PrivateCluster
) -> None:
    n = 30_000
    nodes.start(2)
    nodes.wait_ready()
    make_schedules(cluster.url, n, spread_s=20)
    wait_until_queued(cluster.url, n // 5)
    cluster.restart()
    wait_all_fired(cluster.url, n, timeout=240)
    _all_alive(nodes)
    nodes.stop()  # once they are gone, nothing more can land: count now
    bodies = queue_bodies(cluster.url)
    assert len(bodies) == n and len(set(bodies)) == n
