"""A private PostgreSQL cluster for the tests that kill or restart the database server.

The shared server on 127.0.0.1:5432 serves every other test (and other people's runs):
a test that kills PostgreSQL makes its own cluster instead, with the Debian binaries
(`/usr/lib/postgresql/*/bin`): `initdb` into a temporary directory, trust authentication,
a free loopback port, started and stopped with `pg_ctl`. As root (CI) the server runs as
the `postgres` system user, since PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
from faults import free_port


def pg_bin() -> Path | None:
    """The newest installed server binaries, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(Path(p).parent.parent.name))
    return Path(found[-1]).parent if found else None


class PrivateCluster:
    def __init__(self, root: Path, bin_dir: Path) -> None:
        self.root = root
        self.bin = bin_dir
        self.data = root / "data"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._as_postgres = os.geteuid() == 0

    def _run(self, *args: str, check: bool = True, timeout: float = 120,
             ) -> subprocess.CompletedProcess[str]:
        cmd = list(args)
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=check, timeout=timeout, capture_output=True,
                              text=True)

    def init(self) -> None:
        if self._as_postgres:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres",
                  "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")

    def start(self) -> None:
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 "
                   f"-c unix_socket_directories={self.root} -c max_connections=100")
        # Right after a kill, the shared memory of the dead server may still be held by a
        # backend that has not noticed yet: pg_ctl then refuses to start; try again.
        deadline = time.monotonic() + 60
        while True:
            done = self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l",
                             str(self.root / "server.log"), "-o", options, "-w", "-t", "60",
                             "start", check=False)
            if done.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the private PostgreSQL did not start: {done.stdout}"
                                   f"{done.stderr}{self.log_tail()}")
            time.sleep(0.5)
        self.wait_ready()

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.url, connect_timeout=3).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def kill(self) -> None:
        """SIGKILL the postmaster and every process it started, at once: the database
        server dies as in an OOM kill or a crash, with no shutdown checkpoint; the next
        start runs crash recovery from the WAL."""
        pid = self.postmaster_pid()
        assert pid is not None, "the private PostgreSQL is not running"
        children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True,
                                  text=True).stdout.split()
        for victim in [pid, *map(int, children)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in [pid, *map(int, children)]):
            assert time.monotonic() < deadline, "PostgreSQL survived SIGKILL"
            time.sleep(0.05)

    def restart(self) -> None:
        """A clean restart (fast shutdown: sessions are disconnected)."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w",
                  "stop")
        self.start()

    def stop(self) -> None:
        if self.postmaster_pid() is not None:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                      "-w", "stop", check=False)

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.root / "server.log").read_text()[-3000:]
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (dead, not yet reaped by its parent) counts as gone
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    return False


@contextlib.contextmanager
def private_cluster() -> Iterator[PrivateCluster]:
    """A running private cluster, removed afterwards. Not under pytest's tmp_path: that
    directory is private to root, and the server may run as `postgres`."""
    bin_dir = pg_bin()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL server binaries (/usr/lib/postgresql/*/bin) are "
                           "needed to run a private cluster")
    root = Path(tempfile.mkdtemp(prefix="tidings-pg-"))
    cluster = PrivateCluster(root, bin_dir)
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
