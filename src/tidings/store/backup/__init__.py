"""Backups and restores of a tidings database, by URL: one `BackupTool` per backend
(`base.py` has the contract), chosen by the URL's scheme."""

from __future__ import annotations

import importlib
from urllib.parse import urlparse

from tidings.clock import Clock
from tidings.errors import ValidationError
from tidings.store.backup.base import BackupReport, BackupTool, Progress, RestoreReport

#: URL scheme -> "module:class" of its tool, imported when used (psycopg only for
#: PostgreSQL).
TOOLS = {
    "sqlite": "tidings.store.backup.sqlite:SQLiteBackup",
    "postgresql": "tidings.store.backup.postgres:PostgresBackup",
    "postgres": "tidings.store.backup.postgres:PostgresBackup",
}


def backup_tool(url: str, clock: Clock) -> BackupTool:
    found = TOOLS.get(urlparse(url).scheme)
    if found is None:
        raise ValidationError("db", f"unsupported database URL scheme "
                              f"{urlparse(url).scheme!r}; use sqlite:/// or postgresql://")
    module, _, name = found.partition(":")
    tool: BackupTool = getattr(importlib.import_module(module), name)(url, clock)
    return tool


__all__ = ["BackupReport", "BackupTool", "Progress", "RestoreReport", "backup_tool"]
