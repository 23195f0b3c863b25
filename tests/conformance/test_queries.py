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
               "reserve_job_group", "read_due"},
    "postgres": {"lock", "try_lock", "notify", "copy_messages", "send_messages",
                 "delete_messages", "stage_schedules", "copy_schedules",
                 "insert_staged_schedules", "finish_jobs", "reserve_job_keys",
                 "current_schema", "set_search_path", "lock_due",
                 "insert_messages_unnest"},
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


def test_no_postgres_statement_limits_a_locking_subquery_it_may_run_twice() -> None:
    """`… WHERE id IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)` can change more than n
    rows: the planner may run the subquery more than once, each run locking other rows (a
    receive of at most 10 returned more under bench/soak.py). A row-locking subquery with
    a LIMIT belongs in a MATERIALIZED CTE, which runs once, or at the top of a SELECT."""
    for name, sql in queries("postgres").items():
        text = " ".join(line.split("--")[0] for line in sql.splitlines()).upper()
        for found in re.finditer(r"\(\s*SELECT\b", text):
            inner, depth = "", 0
            for ch in text[found.start():]:
                depth += {"(": 1, ")": -1}.get(ch, 0)
                inner += ch
                if depth == 0:
                    break
            if "LIMIT" in inner and re.search(r"FOR\s+(NO\s+KEY\s+)?UPDATE|FOR\s+SHARE", inner):
                before = text[:found.start()].rstrip()
                assert before.endswith("AS MATERIALIZED"), \
                    f"{name}: a LIMITed locking subquery outside a MATERIALIZED CTE"


def test_every_write_to_a_schedule_row_adds_one_to_its_version() -> None:
    """A firing pass's completion is a compare-and-set on the version it read
    (`FiringPass.complete`): a statement that changed a schedule and left its version
    alone would let a completion planned from the row as it was go through."""
    for backend in ("sqlite", "postgres"):
        for name, sql in queries(backend).items():
            code = " ".join(line.split("--")[0] for line in sql.splitlines())
            if re.search(r"\bUPDATE\s+schedules\b", code, re.IGNORECASE):
                assert re.search(r"\bversion\s*=\s*(s\.)?version\s*\+\s*1\b", code), \
                    f"{backend}: {name} writes a schedule without a new version"
