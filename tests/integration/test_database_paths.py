"""Where the database is, as real `tidings` processes meet it: a mistyped path is refused
(exit 2, the folder named) instead of becoming a new, empty database; commands that only
read never create one; a new one is announced with its absolute path; a database this
user may not write is one line naming the file or folder, not a traceback."""

from __future__ import annotations

import ctypes
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from cli_runner import Cli
from faults import Serve

pytestmark = pytest.mark.timeout(180)

#: Every command that only reads (each would fail on what it looks for, but only after
#: opening the database, which is what is tested).
READ_ONLY = [
    ("queue", "list"), ("queue", "get", "jobs"), ("queue", "peek", "jobs"),
    ("schedule", "list"), ("schedule", "get", "nightly"), ("schedule-group", "list"),
    ("email", "status"), ("email", "log"), ("email", "template", "list"),
    ("email", "suppress", "list"), ("campaign", "list"), ("campaign", "status", "spring"),
    ("audit",), ("migrate", "--check"),
]


def test_a_mistyped_path_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/tidngs/data.db"
    cli = Cli(url, tmp_path)
    (tmp_path / "noop.py").write_text("from tidings import App\napp = App(queue='jobs')\n")
    for command in (("serve", "--port", "0"), ("worker", "--app", "noop:app"),
                    ("queue", "create", "jobs"), ("migrate",)):
        r = cli.run(*command)
        assert r.returncode == 2, (command, r.stderr)
        assert (f"error: db: the folder {tmp_path}/tidngs does not exist, so "
                f"{tmp_path}/tidngs/data.db would be a new, empty database") in r.stderr
        assert "--create" in r.stderr
    assert not (tmp_path / "tidngs").exists()


def test_create_makes_the_folder_and_the_new_database_is_announced(tmp_path: Path) -> None:
    node = Serve(f"sqlite:///{tmp_path}/srv/tidings/data.db", tmp_path, "--create")
    try:
        node.wait_ready()
    finally:
        node.stop()
    log = (tmp_path / "serve.log").read_text()
    assert f"WARNING tidings.migrate: creating a new tidings database in " \
        f"{tmp_path}/srv/tidings/data.db" in log
    assert (tmp_path / "srv" / "tidings" / "data.db").is_file()


def test_a_new_database_in_an_existing_folder_is_announced_with_its_absolute_path(
        tmp_path: Path) -> None:
    r = Cli("sqlite:///tidings.db", tmp_path).run("queue", "create", "jobs")  # relative
    assert r.returncode == 0, r.stderr
    assert f"creating a new tidings database in {tmp_path}/tidings.db" in r.stderr


def test_commands_that_only_read_never_create_a_database(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    cli = Cli("sqlite:///tidings.db", empty)  # the default: relative to where it runs
    for command in READ_ONLY:
        r = cli.run(*command)
        assert r.returncode == 1, (command, r.stdout, r.stderr)
        assert f"error: there is no tidings database at {empty}/tidings.db" in r.stderr, \
            command
        assert list(empty.iterdir()) == [], command


def test_commands_that_only_read_never_create_tables_in_postgres(pg_schema: str,
                                                                 tmp_path: Path) -> None:
    from conftest import PG_BASE, pg_url

    cli = Cli(pg_url(pg_schema), tmp_path)
    for command in READ_ONLY:
        r = cli.run(*command)
        assert r.returncode == 1, (command, r.stdout, r.stderr)
        assert "error: there is no tidings database in PostgreSQL at" in r.stderr, command
    with psycopg.connect(PG_BASE) as conn:
        assert conn.execute("SELECT count(*) FROM information_schema.tables "
                            "WHERE table_schema = %s", (pg_schema,)).fetchone() == (0,)


# a database this user may not write ------------------------------------------------------------

def _without_root_powers() -> None:
    """In the child: root reads and writes any file (CAP_DAC_OVERRIDE); dropping that
    from the bounding set before exec makes it obey permissions like any user."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
            if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def run_unprivileged(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    return subprocess.run([sys.executable, "-m", "tidings", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60,
                          preexec_fn=_without_root_powers)


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Path]:
    """A database with a queue, in a folder of its own; permissions put back afterwards."""
    folder = tmp_path / "data"
    folder.mkdir()
    Cli(f"sqlite:///{folder}/t.db", tmp_path).ok("queue", "create", "jobs", "--create")
    probe = folder / "probe"
    probe.write_text("")
    probe.chmod(0o444)
    try:
        wrote = subprocess.run([sys.executable, "-c", f"open({str(probe)!r}, 'a')"],
                               preexec_fn=_without_root_powers, capture_output=True)
    except (OSError, subprocess.SubprocessError):
        pytest.skip("cannot run a process that obeys file permissions here")
    if wrote.returncode == 0:
        pytest.skip("this process writes read-only files (no way to drop that here)")
    probe.unlink()
    yield folder / "t.db"
    for path in (folder, *folder.iterdir()):
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


def test_a_read_only_database_file_is_one_line_naming_it(database: Path,
                                                         tmp_path: Path) -> None:
    url = f"sqlite:///{database}"
    database.chmod(0o444)
    for command in (("serve", "--port", "0", "--db", url),
                    ("queue", "send", "jobs", "hello", "--db", url)):
        r = run_unprivileged(tmp_path, *command)
        assert r.returncode == 1, (command, r.stderr)
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
        assert str(database) in r.stderr and "read-only" in r.stderr, r.stderr
    # a command that only reads still reads it
    listed = run_unprivileged(tmp_path, "queue", "list", "--db", url)
    assert listed.returncode == 0 and "jobs" in listed.stdout, listed.stderr


def test_a_read_only_folder_is_one_line_naming_it(database: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{database}"
    database.parent.chmod(0o555)
    r = run_unprivileged(tmp_path, "serve", "--port", "0", "--db", url)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"its folder {database.parent} is read-only" in r.stderr


def test_a_read_only_postgresql_is_one_line(pg_schema: str, tmp_path: Path) -> None:
    """A standby, or a role whose transactions are read-only: 'read-only', not a 500's
    traceback (the first write of a send here)."""
    from conftest import pg_url

    url = pg_url(pg_schema)
    Cli(url, tmp_path).ok("queue", "create", "jobs")
    read_only = Cli(url + "%20-cdefault_transaction_read_only%3Don", tmp_path)
    r = read_only.run("queue", "send", "jobs", "hello")
    assert r.returncode == 1, r.stderr
    assert r.stderr.count("\n") == 1 and "PostgreSQL is read-only" in r.stderr, r.stderr
    assert "jobs" in read_only.ok("queue", "list")
