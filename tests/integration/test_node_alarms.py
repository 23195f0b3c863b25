"""The console's node alarms, from real `tidings serve` processes on both backends: a node
stopped with SIGTERM says goodbye (no alarm); a node killed -9 and started again on its
host is shown as replaced (no alarm) rather than "stopped heart-beating" for an hour."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from faults import Serve

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.model.nodes import NodeRecord
from tidings.ops.nodes import SILENT_AFTER_MS
from tidings.ops.overview import NodeView
from tidings.settings import Settings
from tidings.store import Create
from tidings.version import VERSION


def nodes(url: str) -> list[NodeRecord]:
    with Tidings(settings=Settings(db=url), create=Create.NOTHING) as t:
        return t.store.list_nodes(0)


def overview_at(url: str, now_ms: int) -> tuple[list[NodeView], list[str]]:
    with Tidings(settings=Settings(db=url), clock=FrozenClock(now_ms),
                 create=Create.NOTHING) as t:
        view = t.overview.overview()
    return view.nodes, [text for text, _ in view.attention]


def started(url: str, tmp_path: Path, log: str) -> Serve:
    node = Serve(url, tmp_path, log_name=log)
    node.wait_ready()
    deadline = time.monotonic() + 30
    while node.proc.pid not in {n.pid for n in nodes(url)}:  # its first heartbeat
        assert time.monotonic() < deadline, "no heartbeat"
        time.sleep(0.05)
    return node


def test_a_node_stopped_cleanly_says_goodbye(db_url: str, tmp_path: Path) -> None:
    node = started(db_url, tmp_path, "a.log")
    assert httpx.get(f"http://127.0.0.1:{node.port}/health").json()["version"] == VERSION
    node.stop()
    [record] = nodes(db_url)
    shown, attention = overview_at(db_url, record.seen_at + SILENT_AFTER_MS + 1)
    assert [(n.state, n.record.version) for n in shown] == [("stopped", VERSION)]
    assert not any("heart-beating" in text for text in attention)


def test_a_node_killed_and_started_again_is_replaced_not_an_alarm(
        db_url: str, tmp_path: Path) -> None:
    killed = started(db_url, tmp_path, "a.log")
    killed.kill()
    again = started(db_url, tmp_path, "b.log")
    try:
        by_pid = {n.pid: n for n in nodes(db_url)}
        dead = by_pid[killed.proc.pid]
        # when the killed node has been silent long enough to be an alarm
        shown, attention = overview_at(db_url, dead.seen_at + SILENT_AFTER_MS + 1)
        states = {n.record.pid: n.state for n in shown}
        assert states == {killed.proc.pid: "replaced", again.proc.pid: "alive"}
        assert not any("heart-beating" in text for text in attention)
        page = httpx.get(f"http://127.0.0.1:{again.port}/ui/", follow_redirects=True).text
        assert f"<td>{again.proc.pid}</td><td>{VERSION}</td>" in page  # the nodes table
    finally:
        again.stop()
