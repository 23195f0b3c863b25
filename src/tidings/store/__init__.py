"""Open a store by URL: `sqlite:///path` (the default) or `postgresql://…`."""

from __future__ import annotations

from urllib.parse import urlparse

from tidings.errors import ValidationError
from tidings.store.base import Store
from tidings.store.migrate import Create

__all__ = ["DEFAULT_URL", "Create", "Store", "open_store", "sqlite_path"]

DEFAULT_URL = "sqlite:///tidings.db"


def sqlite_path(url: str) -> str:
    """`sqlite:///rel/path.db` is relative, `sqlite:////abs/path.db` absolute (SQLAlchemy's
    convention, which users already know); `sqlite://:memory:` is accepted for tests."""
    rest = url[len("sqlite://") :]
    if rest in (":memory:", "/:memory:"):
        return ":memory:"
    if not rest.startswith("/") or rest == "/":
        raise ValidationError("db", "a SQLite URL looks like sqlite:///path/to/tidings.db")
    return rest[1:]


def open_store(url: str, *, now: int, sqlite_synchronous: str = "NORMAL",
               sqlite_cache_mb: int = 32, create: Create = Create.DATABASE,
               check: str = "off", wake_horizon_ms: int | None = None) -> Store:
    """The store for `url`: `SqlStore` over the driver its scheme names. `create` says
    what opening may do where the database is missing or older than this release; a
    database migrated by a newer release is refused (`SchemaTooNew`) whatever it says.
    `check` ("quick", "full" or "off"): read a SQLite file whole for damage before writing
    to it (a node's start); PostgreSQL checks its own pages as it reads them (and with
    data checksums, their contents). `wake_horizon_ms`: schedules written due within it
    wake the dispatchers (default: that of the default fallback poll)."""
    from tidings.notify.base import WAKE_HORIZON_MS
    from tidings.store.sqlstore import SqlStore

    horizon = WAKE_HORIZON_MS if wake_horizon_ms is None else wake_horizon_ms

    scheme = urlparse(url).scheme
    if scheme == "sqlite":
        from tidings.store.drivers.sqlite import SQLiteDriver

        return SqlStore(SQLiteDriver(sqlite_path(url), now=now, synchronous=sqlite_synchronous,
                                     cache_mb=sqlite_cache_mb, create=create,
                                     check=check), wake_horizon_ms=horizon)
    if scheme in ("postgresql", "postgres"):
        from tidings.store.drivers.postgres import PostgresDriver

        return SqlStore(PostgresDriver(url, now=now, create=create), wake_horizon_ms=horizon)
    raise ValidationError("db", f"unsupported database URL scheme {scheme!r}; use sqlite:/// "
                          "or postgresql://")
