"""Named queries: the same names on both backends (where `SqlStore` runs them), each one
used somewhere, none left over."""

from __future__ import annotations

import re
from pathlib import Path

from tidings.store.sqlfiles import queries

STORE = Path(__file__).resolve().parents[2] / "src" / "tidings" / "store"
#: What only one driver runs: its transaction control, locks, wake-ups and fast paths.
ONLY = {
    "sqlite": {"begin", "commit", "rollback", "delete_message", "finish_job", "reserve_job",
               "job_key_states", "job_key_state", "finish_job_keys", "delete_leased",
               "reserve_job_group", "read_due", "advance_read", "delete_read"},
    "postgres": {"lock", "try_lock", "notify", "copy_messages", "send_messages",
                 "delete_messages", "stage_schedules", "copy_schedules",
                 "insert_staged_schedules", "finish_jobs", "reserve_job_keys",
                 "current_schema", "set_search_path"},
}


def test_both_backends_name_the_same_queries() -> None:
    lite, pg = set(queries("sqlite")), set(queries("postgres"))
    assert lite - ONLY["sqlite"] == pg - ONLY["postgres"]
    assert ONLY["sqlite"] <= lite and ONLY["postgres"] <= pg


def test_every_query_is_used() -> None:
    code = "\n".join(p.read_text() for p in STORE.rglob("*.py"))
    used = set(re.findall(r"""["']([a-z_]+)["']""", code))
    for backend in ("sqlite", "postgres"):
        unused = set(queries(backend)) - used
        assert not unused, f"{backend}: unused queries {sorted(unused)}"
