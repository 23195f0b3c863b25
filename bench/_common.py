"""Helpers shared by the benchmarks: scratch folders and databases, peak RSS, percentiles
and the final JSON line."""

from __future__ import annotations

import atexit
import json
import os
import resource
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# `bench/email.py` carries the name its issue gives it; with this folder first on sys.path
# (as it is for any `python bench/x.py`) it would shadow the stdlib `email` package, which
# tidings imports. Import this module first: it moves the folder to the end.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE] + [_HERE]


def scratch_dir(prefix: str = "tidings-bench-") -> str:
    """A temporary folder for a run's database and logs, removed when the run ends: a
    million-schedule run leaves ~0.5 GB behind otherwise. TIDINGS_BENCH_KEEP=1 keeps it
    (to read the server's log after a failure)."""
    path = tempfile.mkdtemp(prefix=prefix)
    if os.environ.get("TIDINGS_BENCH_KEEP") != "1":
        atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


@contextmanager
def scratch_database(pg: str | None, sqlite_path: str) -> Iterator[str]:
    """The URL of a run's database: the SQLite file `sqlite_path`, or a fresh schema in
    the PostgreSQL database `pg` (so no run sees another's rows), dropped afterwards."""
    if pg is None:
        yield f"sqlite:///{sqlite_path}"
        return
    import psycopg  # (here: it imports the stdlib `email`, see above)

    schema = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield f"{pg}{'&' if '?' in pg else '?'}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def peak_rss_mb() -> float:
    # ru_maxrss is in KiB on Linux
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    k = min(int(round(q / 100 * (len(sorted_values) - 1))), len(sorted_values) - 1)
    return sorted_values[k]


def report(figures: dict[str, Any]) -> None:
    """Human-readable lines to stderr, then the figures as the last line on stdout."""
    for key, value in figures.items():
        print(f"  {key:>24}: {value}", file=sys.stderr)
    print(json.dumps(figures), flush=True)
