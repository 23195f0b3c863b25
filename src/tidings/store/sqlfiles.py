"""SQL lives in `.sql` files beside each backend, loaded once with importlib.resources."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


@cache
def queries(backend: str) -> dict[str, str]:
    """Named blocks of `sql/<backend>/queries.sql` and of the other files beside it that
    are not migrations (one per part of the store that has many, e.g. `push.sql`):
    `-- name: x` up to the next name."""
    folder = resources.files("tidings.store").joinpath("sql", backend)
    found: dict[str, str] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql") or re.match(r"^\d{4}_", entry.name):
            continue
        parts = _NAME.split(entry.read_text())
        for i in range(1, len(parts), 2):
            assert parts[i] not in found, f"query {parts[i]} is named twice"
            found[parts[i]] = parts[i + 1].strip().rstrip(";")
    return found


@cache
def migrations(backend: str) -> tuple[tuple[int, str, str], ...]:
    """Numbered migration files `NNNN_name.sql`, in order: (version, name, sql). Read once:
    a running node's schema check compares against them every few seconds."""
    folder = resources.files("tidings.store").joinpath("sql", backend)
    found = []
    for entry in folder.iterdir():
        match = re.match(r"^(\d{4})_(\w+)\.sql$", entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text()))
    return tuple(sorted(found))
