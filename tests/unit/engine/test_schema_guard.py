"""The running node's schema check, on every backend: quiet on its own schema, a warning
once for newer additive migrations, `SchemaTooNew` for any other newer one."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tidings.client import Tidings
from tidings.errors import SchemaTooNew
from tidings.ops.schema_guard import SchemaGuard
from tidings.runtime.bridge import Bridge
from tidings.settings import Settings
from tidings.store import migrate, open_store


def newer_release(db_url: str, monkeypatch: pytest.MonkeyPatch, *extra: migrate.Migration,
                  ) -> None:
    ours = migrate.known
    with monkeypatch.context() as newer:
        newer.setattr(migrate, "known", lambda backend: [*ours(backend), *extra])
        newer.setattr(migrate, "VERSION", "9.9.0")
        open_store(db_url, now=2).close()


def test_the_guard_warns_once_then_stops_the_node(
        t: Tidings, db_url: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tidings.schema")
    bridge = Bridge(1)
    guard = SchemaGuard(t.store, bridge, warned_at_open=t.schema_status().database)

    async def check() -> None:
        await guard.check()

    try:
        asyncio.run(check())
        assert caplog.records == []
        additive = migrate.Migration(98, "later", "-- additive: a new table\n"
                                     "CREATE TABLE later (id INTEGER PRIMARY KEY);")
        newer_release(db_url, monkeypatch, additive)
        asyncio.run(check())
        asyncio.run(check())
        [warning] = caplog.records
        assert "migration 98 (later), applied by tidings 9.9.0" in warning.getMessage()
        assert "so this node keeps running" in warning.getMessage()
        newer_release(db_url, monkeypatch, additive,
                      migrate.Migration(99, "breaking", "DROP TABLE later;"))
        for _ in range(2):  # (the second look finds nothing changed: it says so again)
            with pytest.raises(SchemaTooNew, match=r"migration 99 \(breaking\)"):
                asyncio.run(check())
    finally:
        bridge.close()


def test_a_node_opened_on_an_additive_newer_schema_is_warned_once(
        db_url: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    open_store(db_url, now=1).close()
    newer_release(db_url, monkeypatch, migrate.Migration(
        98, "later", "-- additive: a new table\nCREATE TABLE later (id INTEGER PRIMARY KEY);"))
    caplog.set_level(logging.WARNING)
    with Tidings(settings=Settings(db=db_url)) as t:
        bridge = Bridge(1)
        try:
            guard = SchemaGuard(t.store, bridge, warned_at_open=t.schema_status().database)
            asyncio.run(guard.check())
        finally:
            bridge.close()
    assert [r.name for r in caplog.records if "9.9.0" in r.getMessage()] == \
        ["tidings.migrate"]
